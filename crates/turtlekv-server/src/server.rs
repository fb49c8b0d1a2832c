//! Starting and stopping: open the database, listen, accept, and on
//! `SHUTDOWN`, SIGTERM or SIGINT close everything in order so the
//! database is closed cleanly (`Db::close`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;
use turtlekv::{Db, Options};

use crate::config::{Config, SyncMode};
use crate::conn;
use crate::error::ServerError;
use crate::shared::Shared;

/// How long a stopping server waits for commands already running.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// File descriptors the server needs beyond one per client: the
/// database's files, the listener, the runtime's own.
const SPARE_FDS: u64 = 256;

/// Raises this process's soft limit on open files towards `wanted` (never
/// above the hard limit) and returns the limit in force. Many systems
/// start processes at 1,024, fewer than the clients a server should hold.
pub fn raise_open_files_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives
    // for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    let target = wanted.min(limit.rlim_max);
    if target > limit.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return target;
        }
    }
    limit.rlim_cur
}

/// Runs the server until it is told to stop, then closes the database.
pub fn run(config: Config) -> Result<(), ServerError> {
    config.validate()?;
    let wanted = u64::try_from(config.max_clients).unwrap_or(u64::MAX) + SPARE_FDS;
    let fds = raise_open_files_limit(wanted);
    if fds < wanted {
        eprintln!(
            "turtlekv-server: the open files limit is {fds}, fewer than --max-clients {} needs",
            config.max_clients
        );
    }
    let mut options = Options::new();
    if let Some(bytes) = config.cache {
        options = options.cache_capacity_bytes(bytes);
    }
    if let Some(compression) = config.compression {
        options = options.compression(compression);
    }
    let db = Db::open(&config.dir, options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(config.engine_threads)
        .thread_name("turtlekv-server")
        .enable_all()
        .build()?;
    let shared = Arc::new(Shared::new(db, config));
    let syncer = (shared.config.sync == SyncMode::Everysec).then(|| Syncer::start(shared.clone()));
    let served = runtime.block_on(accept_loop(shared.clone()));
    // Commands still running on the blocking pool finish first.
    runtime.shutdown_timeout(DRAIN_TIMEOUT);
    if let Some(syncer) = syncer {
        syncer.stop();
    }
    let shared = Arc::into_inner(shared).ok_or_else(|| {
        ServerError::Config("a command was still running after the drain timeout".into())
    })?;
    shared.db.close()?;
    served
}

async fn accept_loop(shared: Arc<Shared>) -> Result<(), ServerError> {
    let listener = TcpListener::bind(shared.config.bind).await?;
    // Tests and scripts read the actual address (port 0 picks one).
    println!("turtlekv-server listening on {}", listener.local_addr()?);
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else {
                    // Out of file descriptors or memory: accepting again at
                    // once would fail again and spin; let connections close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let counters = &shared.counters;
                if counters.connections_current.load(Ordering::Relaxed) >= shared.config.max_clients {
                    counters.connections_rejected.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(async move {
                        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                    });
                    continue;
                }
                counters.connections_current.fetch_add(1, Ordering::Relaxed);
                counters.connections_total.fetch_add(1, Ordering::Relaxed);
                let shared = shared.clone();
                connections.spawn(async move {
                    conn::serve(stream, shared.clone()).await;
                    shared.counters.connections_current.fetch_sub(1, Ordering::Relaxed);
                });
            }
            // Finished connections are reaped as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = shared.shutdown.notified() => break,
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// `--sync everysec`: a thread that syncs the log once a second.
struct Syncer {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl Syncer {
    fn start(shared: Arc<Shared>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("turtlekv-everysec".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    thread::park_timeout(Duration::from_secs(1));
                    if let Err(e) = shared.db.flush_wal() {
                        eprintln!("turtlekv-server: syncing the log failed: {e}");
                    }
                }
            })
            .expect("the everysec thread starts");
        Syncer { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}
