//! The control socket: how another process asks a database's owner for
//! what only the owner can do while it holds the database open, a backup
//! (`docs/format.md`, "Control socket").
//!
//! A handle opened with `Db::open` serves a Unix-domain stream socket,
//! `control.sock` in the database directory, on a thread of its own, and
//! removes it when it closes. The directory's permissions protect it: a
//! process that may not enter the directory cannot connect. Each
//! connection carries one request line and gets one reply line. The socket
//! is no data file of the database: it goes through the operating system's
//! socket calls, not the `io::FileSystem` layer, and is served only for
//! the real file system.

use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::io::AsRawFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::db::backup::{BackupReport, backup};
use crate::db::inner::DbInner;
use crate::{Error, Result};

/// Name of the socket in the database directory.
pub const CONTROL_SOCKET_NAME: &str = "control.sock";

/// Longest request line read; a longer one is refused.
const MAX_REQUEST_BYTES: u64 = 16 * 1024;
/// How long the owner waits for a client's request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The owner's side: the serving thread, if one runs.
#[derive(Debug, Default)]
pub(crate) struct Control(Mutex<Option<Server>>);

#[derive(Debug)]
struct Server {
    path: PathBuf,
    listener: Arc<UnixListener>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Control {
    /// Starts serving `inner`'s socket. Best effort: where the socket
    /// cannot be made (a file system without sockets) the database opens
    /// all the same, and a client is told that no owner answers.
    pub fn serve(&self, inner: &Arc<DbInner>) {
        let path = inner.path.join(CONTROL_SOCKET_NAME);
        // The open holds the lock: a socket left here is a dead owner's.
        let _ = std::fs::remove_file(&path);
        let Ok((address, _dir)) = socket_address(&path) else {
            return;
        };
        let Ok(listener) = UnixListener::bind(&address) else {
            return;
        };
        let listener = Arc::new(listener);
        let stop = Arc::new(AtomicBool::new(false));
        let (weak, accepting, stopping) = (Arc::downgrade(inner), listener.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("turtlekv-control".into())
            .spawn(move || accept_loop(&accepting, &weak, &stopping));
        match thread {
            Ok(thread) => {
                *self.0.lock() = Some(Server {
                    path,
                    listener,
                    stop,
                    thread,
                });
            }
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Stops serving (after the request being served, if any) and removes
    /// the socket. Shutting the listening socket down wakes the thread
    /// from `accept`.
    pub fn stop(&self) {
        let Some(server) = self.0.lock().take() else {
            return;
        };
        server.stop.store(true, Ordering::Release);
        // SAFETY: the descriptor belongs to `server.listener`, alive here.
        unsafe { libc::shutdown(server.listener.as_raw_fd(), libc::SHUT_RDWR) };
        let _ = server.thread.join();
        let _ = std::fs::remove_file(&server.path);
    }
}

/// Longest path a socket address holds (`sun_path`, 108 bytes with its
/// terminating zero).
const SOCKET_PATH_MAX_BYTES: usize = 107;

/// The path to bind or connect to for `socket`: the path itself, or, where
/// it is longer than a socket address holds, the same file reached through
/// an open descriptor of its directory (`/proc/self/fd/N/control.sock`),
/// returned with it: the caller keeps it open until it has bound or
/// connected.
fn socket_address(socket: &Path) -> io::Result<(PathBuf, Option<std::fs::File>)> {
    if socket.as_os_str().len() <= SOCKET_PATH_MAX_BYTES {
        return Ok((socket.to_path_buf(), None));
    }
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Err(io::Error::other("a socket path without a directory"));
    };
    let dir = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    Ok((short, Some(dir)))
}

fn accept_loop(listener: &UnixListener, inner: &Weak<DbInner>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of descriptors, say: wait rather than spin on accept.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let Some(inner) = inner.upgrade() else { return };
        // A client that goes away mid-reply changes nothing for the owner.
        let _ = serve(&inner, stream);
    }
}

/// Reads one request, runs it, writes the reply.
fn serve(inner: &DbInner, stream: UnixStream) -> io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = Vec::new();
    BufReader::new((&stream).take(MAX_REQUEST_BYTES)).read_until(b'\n', &mut line)?;
    let reply = match parse_request(&line) {
        Some(dest) => encode_reply(&backup(inner, &dest)),
        None => format!(
            "error other unknown request: {}\n",
            String::from_utf8_lossy(&line).trim()
        ),
    };
    (&stream).write_all(reply.as_bytes())
}

/// `backup <absolute destination>\n`: the destination's bytes as given.
fn parse_request(line: &[u8]) -> Option<PathBuf> {
    let line = line.strip_suffix(b"\n")?;
    let dest = line.strip_prefix(b"backup ")?;
    let dest = Path::new(std::ffi::OsStr::from_bytes(dest));
    dest.is_absolute().then(|| dest.to_path_buf())
}

/// `ok <sequence> <pages> <page bytes> <log entries> <value files>
/// <value file bytes>`, or `error <kind> <message>`, one line (a
/// message's line breaks become spaces).
fn encode_reply(result: &Result<BackupReport>) -> String {
    match result {
        Ok(r) => format!(
            "ok {} {} {} {} {} {}\n",
            r.sequence, r.pages, r.page_bytes, r.log_entries, r.value_files, r.value_file_bytes
        ),
        Err(e) => {
            let kind = match e {
                Error::BackupTarget { .. } => "target",
                Error::Corruption { .. } => "corruption",
                _ => "other",
            };
            let one_field = |s: &str| s.replace(['\n', '\t'], " ");
            let message = match e {
                Error::BackupTarget { reason, .. } => one_field(reason),
                Error::Corruption {
                    file,
                    offset,
                    reason,
                } => format!(
                    "{offset}\t{}\t{}",
                    one_field(&file.to_string_lossy()),
                    one_field(reason)
                ),
                e => one_field(&e.to_string()),
            };
            format!("error {kind} {message}\n")
        }
    }
}

/// The client's side: asks the owner of the database at `db` to back it
/// up into `dest` (made absolute here: the owner's working directory is
/// its own) and waits for the reply.
pub(crate) fn request_backup(db: &Path, dest: &Path) -> Result<BackupReport> {
    let dest = std::path::absolute(dest)?;
    let mut request = b"backup ".to_vec();
    request.extend_from_slice(dest.as_os_str().as_bytes());
    if request.contains(&b'\n') {
        return Err(Error::BackupTarget {
            dest,
            reason: "its path holds a line break, which the control socket cannot carry".into(),
        });
    }
    request.push(b'\n');
    let socket = db.join(CONTROL_SOCKET_NAME);
    let connected =
        socket_address(&socket).and_then(|(address, _dir)| UnixStream::connect(address));
    let mut stream = connected.map_err(|e| {
        Error::Io(io::Error::new(
            e.kind(),
            format!(
                "the database at {} is held by another handle, and no owner answers on {}: {e}",
                db.display(),
                socket.display()
            ),
        ))
    })?;
    stream.write_all(&request)?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    decode_reply(reply.trim_end_matches('\n'), &dest)
}

/// The reply line as the result `Db::backup` gave the owner: a refused
/// destination stays `Error::BackupTarget`; other failures carry the
/// owner's message.
fn decode_reply(reply: &str, dest: &Path) -> Result<BackupReport> {
    let bad = || {
        Error::Io(io::Error::other(format!(
            "bad reply from the owner: {reply:?}"
        )))
    };
    if let Some(numbers) = reply.strip_prefix("ok ") {
        let n: Vec<u64> = numbers
            .split(' ')
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad())?;
        // An owner of a build without value files gives four numbers.
        let (sequence, pages, page_bytes, log_entries, value_files, value_file_bytes) = match n[..]
        {
            [a, b, c, d] => (a, b, c, d, 0, 0),
            [a, b, c, d, e, f] => (a, b, c, d, e, f),
            _ => return Err(bad()),
        };
        return Ok(BackupReport {
            sequence,
            pages,
            page_bytes,
            log_entries,
            value_files,
            value_file_bytes,
        });
    }
    let (kind, message) = reply
        .strip_prefix("error ")
        .and_then(|rest| rest.split_once(' '))
        .ok_or_else(bad)?;
    let mut fields = message.splitn(3, '\t');
    let corruption = (fields.next(), fields.next(), fields.next());
    Err(match (kind, corruption) {
        ("target", _) => Error::BackupTarget {
            dest: dest.to_path_buf(),
            reason: message.to_string(),
        },
        ("corruption", (Some(offset), Some(file), Some(reason))) => Error::Corruption {
            file: PathBuf::from(file),
            offset: offset.parse().map_err(|_| bad())?,
            reason: reason.to_string(),
        },
        _ => Error::Io(io::Error::other(format!(
            "the owner's backup failed: {message}"
        ))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_the_report_and_the_errors_a_caller_tells_apart() {
        let dest = Path::new("/backups/db");
        let report = BackupReport {
            sequence: 42,
            pages: 7,
            page_bytes: 28_672,
            log_entries: 3,
            value_files: 2,
            value_file_bytes: 1 << 20,
        };
        let round_trip = |r: Result<BackupReport>| {
            let line = encode_reply(&r);
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line:?}"
            );
            decode_reply(line.trim_end_matches('\n'), dest)
        };
        assert_eq!(round_trip(Ok(report)).unwrap(), report);
        let refused = Error::BackupTarget {
            dest: dest.to_path_buf(),
            reason: "it exists and is not an empty directory".into(),
        };
        match round_trip(Err(refused)) {
            Err(Error::BackupTarget { dest: d, reason }) => {
                assert_eq!(
                    (d.as_path(), reason.as_str()),
                    (dest, "it exists and is not an empty directory")
                );
            }
            other => panic!("{other:?}"),
        }
        let corrupt = Error::corruption("/db/leaves.pages", 8192, "checksum mismatch\nin block 2");
        match round_trip(Err(corrupt)) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!(file, Path::new("/db/leaves.pages"));
                assert_eq!(offset, 8192);
                assert_eq!(reason, "checksum mismatch in block 2");
            }
            other => panic!("{other:?}"),
        }
        match round_trip(Err(Error::Io(io::Error::other("disk full")))) {
            Err(Error::Io(e)) => assert!(e.to_string().contains("disk full"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(decode_reply("what", dest).is_err());
        assert!(decode_reply("ok 1 2", dest).is_err());
    }

    #[test]
    fn only_a_backup_to_an_absolute_path_is_a_request() {
        assert_eq!(
            parse_request(b"backup /a b/c\n"),
            Some(PathBuf::from("/a b/c"))
        );
        assert_eq!(parse_request(b"backup relative\n"), None);
        assert_eq!(parse_request(b"backup /no-newline"), None);
        assert_eq!(parse_request(b"restore /x\n"), None);
    }

    #[test]
    fn an_owner_backs_itself_up_for_a_client_and_stops_serving_at_close() {
        let dir = tempfile::tempdir().unwrap();
        backs_itself_up_for_a_client(dir.path(), &dir.path().join("db"));
    }

    /// A path longer than a socket address holds is served and reached
    /// through a descriptor of its directory.
    #[test]
    fn a_database_at_a_long_path_is_served_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d".repeat(120)).join("db");
        assert!(path.join(CONTROL_SOCKET_NAME).as_os_str().len() > SOCKET_PATH_MAX_BYTES);
        backs_itself_up_for_a_client(dir.path(), &path);
    }

    fn backs_itself_up_for_a_client(dir: &Path, path: &Path) {
        let db = crate::Db::open(path, crate::db::checkpointing_test_options()).unwrap();
        for i in 0..500u32 {
            db.put(i.to_be_bytes(), b"v").unwrap();
        }
        let socket = path.join(CONTROL_SOCKET_NAME);
        assert!(socket.exists());
        let dest = dir.join("copy");
        // The database is locked: `backup_at` asks its owner, this handle.
        let report = crate::Db::backup_at(path, &dest).unwrap();
        assert_eq!(report.sequence, 500);
        assert!(matches!(
            request_backup(path, &dest),
            Err(Error::BackupTarget { .. })
        ));
        db.close().unwrap();
        assert!(!socket.exists());
        let copy = crate::Db::open_read_only(&dest).unwrap();
        assert_eq!(copy.range::<&[u8], _>(..).count(), 500);
    }
}
