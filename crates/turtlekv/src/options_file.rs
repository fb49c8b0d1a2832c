//! Options stored with a database: the page sizes it was created with (from
//! the superblock) and the memory knobs chosen for it (the `OPTIONS` file,
//! written by `turtlekv tune`), so that tools and applications can open it
//! the way it was tuned.

use std::path::Path;

use crate::io::{FileSystem, OpenOptions, RealFs, read_all};
use crate::store::superblock::{SUPERBLOCK_FILE_NAME, Slot, read_newest};
use crate::{Error, Options, Result};

/// Name of the stored-options file in the database directory.
pub const OPTIONS_FILE_NAME: &str = "OPTIONS";

/// The first line of a version-2 file, up to the identity; the rest of
/// the line is `<16 hex digits>, crc32c <8 hex digits>` (`docs/format.md`,
/// "Stored options").
const VERSION_2_PREFIX: &str = "# TurtleKV OPTIONS 2, database ";
/// How a version-2 line starts, cut anywhere: a file whose first line
/// starts so is never taken for version 1.
const VERSION_PREFIX: &str = "# TurtleKV OPTIONS ";

const HEADER: &str = "# TurtleKV stored options: read by Options::load, written by Options::store\n# (`turtlekv tune`). One `name = value` per line; sizes in bytes.\n";

impl Options {
    /// The options to open the database at `path` with: the defaults, the
    /// page sizes the database was created with, and the knobs stored by
    /// [`Options::store`]. A path without a database gives the defaults.
    pub fn load(path: impl AsRef<Path>) -> Result<Options> {
        load_with_fs(&RealFs, path.as_ref())
    }

    /// Stores the knobs that may change between opens (memory budget,
    /// checkpoint distance and threads, filter bits, direct I/O, WAL
    /// segment size, compression) as the database's defaults for [`Options::load`]. The
    /// database directory must exist. The file is replaced atomically.
    pub fn store(&self, path: impl AsRef<Path>) -> Result<()> {
        store_with_fs(&RealFs, path.as_ref(), self)
    }
}

/// [`Options::load`] through a chosen file layer.
pub(crate) fn load_with_fs(fs: &dyn FileSystem, dir: &Path) -> Result<Options> {
    let mut options = Options::default();
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(options),
        Err(e) => return Err(e.into()),
    };
    let slot = newest_slot(fs, dir, &names)?;
    if let Some(slot) = slot {
        options.node_size_bytes = slot.node_size_bytes;
        options.leaf_size_bytes = slot.leaf_size_bytes;
    }
    if names.iter().any(|n| n == OPTIONS_FILE_NAME) {
        let database_id = slot.and_then(|s| s.identity).map(|i| i.id);
        read_stored(fs, dir, database_id, &mut options)?;
        options.validate()?;
    }
    Ok(options)
}

/// Checks the stored options of the database at `dir` (`Db::check`): the
/// file's checksum and identity hold and its knobs parse. `Ok(false)`
/// when there is no file.
pub(crate) fn check_stored(fs: &dyn FileSystem, dir: &Path, database_id: u64) -> Result<bool> {
    if !fs.list_dir(dir)?.iter().any(|n| n == OPTIONS_FILE_NAME) {
        return Ok(false);
    }
    read_stored(fs, dir, Some(database_id), &mut Options::default())?;
    Ok(true)
}

/// Reads `OPTIONS` into `options`, verifying its version line.
fn read_stored(
    fs: &dyn FileSystem,
    dir: &Path,
    database_id: Option<u64>,
    options: &mut Options,
) -> Result<()> {
    let path = dir.join(OPTIONS_FILE_NAME);
    let bytes = read_all(&*fs.open(&path, OpenOptions::read_only())?)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::InvalidOptions(format!("{} is not UTF-8", path.display())))?;
    let body =
        verified_body(&text, database_id).map_err(|reason| Error::corruption(&path, 0, reason))?;
    parse_into(body, options)
        .map_err(|msg| Error::InvalidOptions(format!("{}: {msg}", path.display())))
}

/// The part of a stored-options text to parse, once its version line's
/// checksum and identity hold; a text without one (version 1, an earlier
/// build's) must at least not be cut inside a line.
fn verified_body(text: &str, database_id: Option<u64>) -> Result<&str, String> {
    if text.is_empty() {
        return Err("the stored options file is empty".into());
    }
    let first_line_len = text.find('\n').unwrap_or(text.len());
    if !text[..first_line_len].starts_with(VERSION_PREFIX) {
        if !text.ends_with('\n') {
            return Err("the stored options end inside a line: the file was cut short".into());
        }
        return Ok(text);
    }
    let (line, body) = text
        .split_once('\n')
        .ok_or("the stored options end inside their version line")?;
    let (named, crc) = line
        .strip_prefix(VERSION_2_PREFIX)
        .and_then(|rest| rest.split_once(", crc32c "))
        .and_then(|(id, crc)| {
            let parse = |hex: &str, digits| {
                (hex.len() == digits)
                    .then(|| u64::from_str_radix(hex, 16).ok())
                    .flatten()
            };
            Some((parse(id, 16)?, parse(crc, 8)?))
        })
        .ok_or_else(|| format!("unreadable version line {line:?}"))?;
    let computed = crc32c::crc32c(body.as_bytes());
    if u64::from(computed) != crc {
        return Err(format!(
            "checksum mismatch: the version line says {crc:08x}, the text after it has \
             {computed:08x} (cut short or changed)"
        ));
    }
    if let Some(id) = database_id
        && named != 0
        && named != id
    {
        return Err(format!(
            "the stored options belong to another database (identity {named:#018x}; this \
             database is {id:#018x})"
        ));
    }
    Ok(body)
}

/// The newest valid superblock slot of the database at `dir`, if any.
fn newest_slot(fs: &dyn FileSystem, dir: &Path, names: &[String]) -> Result<Option<Slot>> {
    if !names.iter().any(|n| n == SUPERBLOCK_FILE_NAME) {
        return Ok(None);
    }
    let file = fs.open(&dir.join(SUPERBLOCK_FILE_NAME), OpenOptions::read_only())?;
    Ok(read_newest(&*file)?.newest)
}

/// [`Options::store`] through a chosen file layer: write a temporary file,
/// sync it, rename it over the old one, sync the directory.
pub(crate) fn store_with_fs(fs: &dyn FileSystem, dir: &Path, options: &Options) -> Result<()> {
    options.validate()?;
    // What `load` will give: the knobs with the database's own page sizes.
    let mut as_loaded = options.clone();
    let slot = newest_slot(fs, dir, &fs.list_dir(dir)?)?;
    if let Some(slot) = slot {
        as_loaded.node_size_bytes = slot.node_size_bytes;
        as_loaded.leaf_size_bytes = slot.leaf_size_bytes;
    }
    as_loaded.validate()?;
    let database_id = slot.and_then(|s| s.identity).map_or(0, |i| i.id);
    let text = format(options, database_id);
    let temp = dir.join(temp_file_name());
    let file = fs.open(&temp, OpenOptions::read_write_create())?;
    // Truncated first: a file left by a crashed store of a process with
    // the same id could hold a longer text.
    let written = file
        .set_len(0)
        .and_then(|()| file.write_at(text.as_bytes(), 0))
        .and_then(|()| file.sync_data());
    drop(file);
    if let Err(e) = written.and_then(|()| fs.rename(&temp, &dir.join(OPTIONS_FILE_NAME))) {
        // The name is this store's own: nothing else will reuse or read it.
        let _ = fs.remove_file(&temp);
        return Err(e.into());
    }
    fs.sync_dir(dir)?;
    Ok(())
}

/// A temporary name of the writer's own: two stores at once (two `turtlekv
/// tune` runs, or threads) would otherwise truncate and write one file
/// together and could rename a mix of both into place. With its own file
/// each renames a whole one, and the last rename wins. A store cut short
/// by a crash leaves its file behind; nothing reads it.
fn temp_file_name() -> String {
    static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let store = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{OPTIONS_FILE_NAME}.tmp.{}.{store}", std::process::id())
}

/// The file's text: the version line, then the body it checksums.
fn format(o: &Options, database_id: u64) -> String {
    let body = format_body(o);
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{VERSION_2_PREFIX}{database_id:016x}, crc32c {crc:08x}\n{body}")
}

fn format_body(o: &Options) -> String {
    format!(
        "{HEADER}cache_capacity_bytes = {}\nrecord_cache_capacity_bytes = {}\nrecord_cache_auto_split = {}\ncheckpoint_distance_bytes = {}\nwrite_only_checkpoint_distance_bytes = {}\ncheckpoint_on_read_pressure = {}\ncheckpoint_io_idle = {}\ncheckpoint_threads = {}\ngarbage_percent = {}\nfilter_bits_per_key = {}\ndirect_io = {}\nwal_segment_size_bytes = {}\ncompression = {}\n",
        o.cache_capacity_bytes,
        o.record_cache_capacity_bytes,
        o.record_cache_auto_split,
        o.checkpoint_distance_bytes,
        o.write_only_checkpoint_distance_bytes,
        o.checkpoint_on_read_pressure,
        o.checkpoint_io_idle,
        o.checkpoint_threads,
        o.garbage_percent,
        o.filter_bits_per_key,
        o.direct_io,
        o.wal_segment_size_bytes,
        o.compression,
    )
}

fn parse_into(text: &str, o: &mut Options) -> Result<(), String> {
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| bad("expected `name = value`"))?;
        let value = value.trim();
        let number = || value.parse::<u64>().map_err(|_| bad("not a number"));
        match name.trim() {
            "cache_capacity_bytes" => o.cache_capacity_bytes = number()?,
            "record_cache_capacity_bytes" => o.record_cache_capacity_bytes = number()?,
            "record_cache_auto_split" => {
                o.record_cache_auto_split = value.parse().map_err(|_| bad("not true/false"))?
            }
            "checkpoint_distance_bytes" => o.checkpoint_distance_bytes = number()?,
            "write_only_checkpoint_distance_bytes" => {
                o.write_only_checkpoint_distance_bytes = number()?
            }
            "checkpoint_on_read_pressure" => {
                o.checkpoint_on_read_pressure = value.parse().map_err(|_| bad("not true/false"))?
            }
            "checkpoint_io_idle" => {
                o.checkpoint_io_idle = value.parse().map_err(|_| bad("not true/false"))?
            }
            "checkpoint_threads" => {
                o.checkpoint_threads = usize::try_from(number()?).map_err(|_| bad("too large"))?
            }
            "garbage_percent" => {
                o.garbage_percent = u32::try_from(number()?).map_err(|_| bad("too large"))?
            }
            "filter_bits_per_key" => {
                o.filter_bits_per_key = u32::try_from(number()?).map_err(|_| bad("too large"))?
            }
            "direct_io" => o.direct_io = value.parse().map_err(|_| bad("not true/false"))?,
            "wal_segment_size_bytes" => o.wal_segment_size_bytes = number()?,
            "compression" => {
                o.compression = value.parse().map_err(|e: Error| bad(&e.to_string()))?
            }
            _ => return Err(bad("unknown option")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Db;
    use crate::io::FaultFs;

    #[test]
    fn stored_knobs_and_page_sizes_come_back() {
        let fs = FaultFs::new();
        let dir = Path::new("/db");
        assert_eq!(load_with_fs(&fs, dir).unwrap(), Options::default());
        let created = Options {
            leaf_size_bytes: 64 * 1024,
            node_size_bytes: 2048,
            ..Options::default()
        };
        drop(Db::open_with_fs(dir, created, Arc::new(fs.clone())).unwrap());
        // Direct I/O cannot work with 2 KiB nodes: refused, not stored.
        let direct = Options {
            direct_io: true,
            ..Options::default()
        };
        assert!(matches!(
            store_with_fs(&fs, dir, &direct),
            Err(Error::InvalidOptions(_))
        ));
        let mut tuned = Options {
            cache_capacity_bytes: 1 << 30,
            checkpoint_distance_bytes: 128 << 20,
            write_only_checkpoint_distance_bytes: 256 << 20,
            checkpoint_io_idle: true,
            compression: crate::Compression::Zstd { level: 7 },
            ..Options::default()
        };
        store_with_fs(&fs, dir, &tuned).unwrap();
        let loaded = load_with_fs(&fs, dir).unwrap();
        assert_eq!(loaded.cache_capacity_bytes, 1 << 30);
        assert_eq!(loaded.checkpoint_distance_bytes, 128 << 20);
        assert_eq!(loaded.write_only_checkpoint_distance_bytes, 256 << 20);
        assert!(loaded.checkpoint_io_idle);
        assert_eq!(loaded.compression, crate::Compression::Zstd { level: 7 });
        assert_eq!(
            (loaded.leaf_size_bytes, loaded.node_size_bytes),
            (64 * 1024, 2048)
        );
        // Storing again replaces the file.
        tuned.checkpoint_distance_bytes = 8 << 20;
        store_with_fs(&fs, dir, &tuned).unwrap();
        assert_eq!(
            load_with_fs(&fs, dir).unwrap().checkpoint_distance_bytes,
            8 << 20
        );
    }

    #[test]
    fn bad_files_and_bad_values_are_invalid_options() {
        let mut o = Options::default();
        for text in [
            "cache_capacity_bytes 5",
            "cache_capacity_bytes = lots",
            "colour = blue",
            "direct_io = maybe",
            "compression = gzip",
            "compression = zstd:23",
            "compression = zstd:fast",
        ] {
            assert!(parse_into(text, &mut o).is_err(), "{text}");
        }
        let bad = Options {
            checkpoint_distance_bytes: 1,
            ..Options::default()
        };
        let fs = FaultFs::new();
        fs.create_dir_all(Path::new("/db")).unwrap();
        assert!(matches!(
            store_with_fs(&fs, Path::new("/db"), &bad),
            Err(Error::InvalidOptions(_))
        ));
        let ok = "# comment\n\ncheckpoint_distance_bytes = 4096\ncompression = zstd:-3\n";
        parse_into(ok, &mut o).unwrap();
        assert_eq!(o.checkpoint_distance_bytes, 4096);
        assert_eq!(o.compression, crate::Compression::Zstd { level: -3 });
        // A bad value names the file and the line.
        let dir = Path::new("/db");
        let body = format_body(&Options::default()).replace("lz4", "zstd:99");
        let line = body.lines().position(|l| l.contains("zstd:99")).unwrap() + 1;
        let crc = crc32c::crc32c(body.as_bytes());
        let text = format!("{VERSION_2_PREFIX}{:016x}, crc32c {crc:08x}\n{body}", 0);
        let file = fs
            .open(
                &dir.join(OPTIONS_FILE_NAME),
                OpenOptions::read_write_create(),
            )
            .unwrap();
        file.write_at(text.as_bytes(), 0).unwrap();
        drop(file);
        match load_with_fs(&fs, dir) {
            Err(Error::InvalidOptions(msg)) => {
                assert!(
                    msg.contains("OPTIONS") && msg.contains(&format!("line {line}")),
                    "{msg}"
                );
                assert!(msg.contains("zstd:99"), "{msg}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Stores at once each rename a whole file: every store succeeds (with
    /// one shared temporary file, a writer's rename found it gone), and a
    /// load in between sees one writer's options or the other's, never a
    /// mix or a parse error.
    #[test]
    fn concurrent_stores_never_mix_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let writer = |distance_bytes: u64, cache_bytes: u64| {
            let tuned = Options {
                checkpoint_distance_bytes: distance_bytes,
                cache_capacity_bytes: cache_bytes,
                // Lengths differ, so a mixed file would not parse or would
                // pair one writer's distance with the other's cache.
                wal_segment_size_bytes: distance_bytes * 4,
                ..Options::default()
            };
            move || {
                for _ in 0..100 {
                    Options::store(&tuned, path).unwrap();
                }
            }
        };
        std::thread::scope(|s| {
            s.spawn(writer(8 << 20, 1 << 30));
            s.spawn(writer(1000 << 20, 10 << 30));
            for _ in 0..200 {
                let loaded = Options::load(path).unwrap();
                let pair = (
                    loaded.checkpoint_distance_bytes,
                    loaded.cache_capacity_bytes,
                    loaded.wal_segment_size_bytes,
                );
                assert!(
                    [
                        (8 << 20, 1 << 30, 32 << 20),
                        (1000 << 20, 10 << 30, 4000 << 20),
                        {
                            let d = Options::default();
                            (
                                d.checkpoint_distance_bytes,
                                d.cache_capacity_bytes,
                                d.wal_segment_size_bytes,
                            )
                        }
                    ]
                    .contains(&pair),
                    "{pair:?}"
                );
            }
        });
        let left: Vec<_> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, [OPTIONS_FILE_NAME], "temporary files left behind");
    }

    /// A store that fails before its rename keeps the old options and
    /// leaves no temporary file behind (each has a name of its own, so none
    /// would be reused).
    #[test]
    fn a_failed_store_keeps_the_old_options_and_no_temporary_file() {
        let fs = FaultFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let stored = |distance_bytes: u64| Options {
            checkpoint_distance_bytes: distance_bytes,
            ..Options::default()
        };
        store_with_fs(&fs, dir, &stored(8 << 20)).unwrap();
        for on in [crate::io::FaultOn::Write, crate::io::FaultOn::Sync] {
            fs.inject(crate::io::Fault {
                on,
                after: 0,
                kind: crate::io::FaultKind::Eio,
                persistent: false,
                path_contains: Some("OPTIONS.tmp".to_string()),
            });
            assert!(
                store_with_fs(&fs, dir, &stored(16 << 20)).is_err(),
                "{on:?}"
            );
            assert!(fs.fault_fired());
            fs.clear_fault();
            assert_eq!(
                load_with_fs(&fs, dir).unwrap().checkpoint_distance_bytes,
                8 << 20
            );
            assert_eq!(fs.list_dir(dir).unwrap(), [OPTIONS_FILE_NAME], "{on:?}");
        }
    }

    /// `Options::store` promises the stored options survive a power cut
    /// once it returns (data synced before the rename, directory after).
    #[test]
    fn stored_options_survive_a_power_cut() {
        let fs = FaultFs::new();
        let dir = Path::new("/db");
        drop(Db::open_with_fs(dir, Options::default(), Arc::new(fs.clone())).unwrap());
        for distance in [128u64 << 20, 8 << 20] {
            let tuned = Options {
                checkpoint_distance_bytes: distance,
                ..Options::default()
            };
            store_with_fs(&fs, dir, &tuned).unwrap();
            let after = fs.crash(crate::io::CrashMode::DropUnsynced);
            let loaded =
                load_with_fs(&after, dir).unwrap_or_else(|e| panic!("load after a power cut: {e}"));
            assert_eq!(loaded.checkpoint_distance_bytes, distance);
        }
    }
}
