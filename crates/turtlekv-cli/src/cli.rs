//! The command line: every command, its arguments and its `--help`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use turtlekv_bench::generator::Distribution;
use turtlekv_bench::workload::Workload;

use crate::encoding::EncodingArgs;
use crate::keyspace::KeyspaceArg;
use crate::records::Format;
use crate::size::parse_size;

#[derive(Debug, Parser)]
#[command(
    name = "turtlekv",
    version,
    about = "Look inside and operate a TurtleKV database",
    long_about = "Look inside and operate a TurtleKV database.\n\n\
        Every command that opens a database uses the options stored in it \
        (see `turtlekv tune`). Only `put` and `load` create a database; the \
        others fail on a path that holds none. A database open in another \
        process is locked, and commands on it fail.\n\n\
        Records live in keyspaces: the default one, and named ones that \
        `--keyspace NAME` selects. Only `put` and `load` create a keyspace.",
    after_help = "Examples:\n  \
        turtlekv put ./my-db apple red\n  \
        turtlekv get ./my-db apple\n  \
        turtlekv scan ./my-db --prefix app --limit 10\n  \
        turtlekv dump ./my-db > backup.jsonl && turtlekv load ./copy backup.jsonl\n  \
        turtlekv put ./my-db --keyspace users alice admin\n  \
        turtlekv keyspaces ./my-db\n  \
        turtlekv stats ./my-db --json\n  \
        turtlekv check ./my-db\n\n\
        Exit codes: 0 ok, 1 failure, 2 bad arguments, 3 key not found (get), \
        4 no database, 5 database locked, 6 corruption, 7 no such keyspace."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// What an open does with a WAL that is not whole (segments missing,
    /// synced records damaged): `strict` reports it as corruption (exit
    /// 6); `point-in-time` opens at the last consistent point and drops
    /// what follows, which `check` then reports. Applies to every command
    /// that opens the database.
    #[arg(long, global = true, value_name = "MODE", default_value = "strict",
          value_parser = parse_wal_recovery)]
    pub wal_recovery: turtlekv::WalRecovery,
}

fn parse_wal_recovery(s: &str) -> Result<turtlekv::WalRecovery, String> {
    s.parse().map_err(|e: turtlekv::Error| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Put(PutArgs),
    Get(GetArgs),
    Delete(DeleteArgs),
    DeleteRange(DeleteRangeArgs),
    Scan(ScanArgs),
    Load(LoadArgs),
    Dump(DumpArgs),
    Keyspaces(KeyspacesArgs),
    DropKeyspace(DropKeyspaceArgs),
    Stats(StatsArgs),
    Check(CheckArgs),
    Checkpoint(CheckpointArgs),
    Backup(BackupArgs),
    Tune(TuneArgs),
    Bench(BenchArgs),
}

/// Set KEY to VALUE.
///
/// The write is durable (fsynced) when the command returns. Creates the
/// database if the directory is new or empty, and the keyspace given with
/// --keyspace if it does not exist.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv put ./my-db apple red\n  \
    turtlekv put ./my-db --hex 00ff 0102\n  \
    turtlekv put ./my-db --keyspace users alice admin")]
pub struct PutArgs {
    #[command(flatten)]
    pub target: KeyArgs,
    /// The value, in the same encoding as the key.
    pub value: String,
}

/// The database and key that `put`, `get` and `delete` work on.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// The key: text, or hex/base64 with --hex/--base64.
    pub key: String,
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub encoding: EncodingArgs,
}

/// Print the value of KEY.
///
/// Exit code 3 when the key has no value, 7 when the keyspace given with
/// --keyspace does not exist. A value that is not UTF-8 needs --hex or
/// --base64.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv get ./my-db apple\n  \
    turtlekv get ./my-db --base64 AP8=\n  \
    turtlekv get ./my-db --keyspace users alice")]
pub struct GetArgs {
    #[command(flatten)]
    pub target: KeyArgs,
    #[command(flatten)]
    pub read_only: ReadOnlyArg,
}

/// `--read-only` of the reading commands.
#[derive(Debug, Args)]
pub struct ReadOnlyArg {
    /// Open without the lock and without writing anything, so that this
    /// works on a database another process holds open: it reads that
    /// database's last checkpoint and WAL tail. If the owner commits a
    /// checkpoint while this reads, the command fails (exit code 8)
    /// rather than print what may be reused pages; run it again, or copy
    /// the database with `turtlekv backup`.
    #[arg(long)]
    pub read_only: bool,
}

impl ReadOnlyArg {
    /// How the command opens its database.
    pub fn create(&self) -> crate::db::Create {
        if self.read_only {
            crate::db::Create::ReadOnly
        } else {
            crate::db::Create::No
        }
    }
}

/// Remove KEY.
///
/// The delete is durable (fsynced) when the command returns. Removing a
/// key that is not there is not an error; a keyspace that is not there
/// is (exit code 7), and is not created.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv delete ./my-db apple\n  \
    turtlekv delete ./my-db --hex 00ff\n  \
    turtlekv delete ./my-db --keyspace users alice")]
pub struct DeleteArgs {
    #[command(flatten)]
    pub target: KeyArgs,
}

/// Remove every key from START up to, not including, END.
///
/// One range deletion, durable (fsynced) when the command returns; it
/// takes the same time however many keys it covers. START must be below
/// END (exit code 2 otherwise, and nothing changes). A keyspace that is not
/// there is an error (exit code 7), and is not created.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv delete-range ./my-db log: 'log;'\n  \
    turtlekv delete-range ./my-db --hex 00 01\n  \
    turtlekv delete-range ./my-db --keyspace users a n")]
pub struct DeleteRangeArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// The first key removed: text, or hex/base64 with --hex/--base64.
    pub start: String,
    /// The first key kept after the range, in the same encoding.
    pub end: String,
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub encoding: EncodingArgs,
}

/// Print records in key order.
///
/// One `KEY<TAB>VALUE` line per record, or JSON Lines with --json. Keys or
/// values that are not UTF-8 need --hex, --base64 or --json.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv scan ./my-db\n  \
    turtlekv scan ./my-db --from b --to d --limit 10\n  \
    turtlekv scan ./my-db --prefix user: --reverse --keys-only\n  \
    turtlekv scan ./my-db --hex --json\n  \
    turtlekv scan ./my-db --keyspace users")]
pub struct ScanArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    /// First key (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// End key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Only keys that start with this prefix.
    #[arg(long, value_name = "PREFIX", conflicts_with_all = ["from", "to"])]
    pub prefix: Option<String>,
    /// Print at most N records.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Largest key first.
    #[arg(long)]
    pub reverse: bool,
    /// Print keys only.
    #[arg(long, conflicts_with = "json")]
    pub keys_only: bool,
    /// Print JSON Lines, as `dump` does (binary-safe without --hex/--base64).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub encoding: EncodingArgs,
    #[command(flatten)]
    pub read_only: ReadOnlyArg,
}

/// Load records from a JSON Lines or CSV file.
///
/// Creates the database (and the keyspace given with --keyspace) if
/// needed. Records are written in batches and made durable at the end; on
/// a bad record the command stops with its line number, and the batches
/// before it stay.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv load ./my-db records.jsonl\n  \
    turtlekv load ./my-db records.csv\n  \
    turtlekv dump ./old-db | turtlekv load ./new-db -\n  \
    turtlekv load ./my-db --keyspace users users.jsonl\n\n\
    JSON Lines: {\"key\": \"apple\", \"value\": \"red\"} per line; key_base64/key_hex and\n\
    value_base64/value_hex hold binary. CSV: a header row `key,value` (or the\n\
    _base64/_hex names) names the columns and their encoding.")]
pub struct LoadArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Input file, or `-` for standard input.
    #[arg(value_name = "FILE")]
    pub file: String,
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    /// Input format (default: from the file's extension, else JSON Lines
    /// when the first character is `{`, else CSV).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// Write every record as JSON Lines or CSV.
///
/// Records come in key order, from one point in time, in a form `load`
/// reads back exactly (binary keys and values included). One keyspace per
/// dump: the default one, or the one given with --keyspace.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv dump ./my-db > backup.jsonl\n  \
    turtlekv dump ./my-db --format csv -o backup.csv\n  \
    turtlekv dump ./my-db --hex\n  \
    turtlekv dump ./my-db --keyspace users > users.jsonl\n\n\
    JSON Lines: a key or value that is UTF-8 is written as \"key\"/\"value\", other\n\
    bytes as \"key_base64\"/\"value_base64\". CSV: the key column is `key` when every\n\
    key is UTF-8, else `key_base64` (values alike). --hex or --base64 uses that\n\
    encoding for everything.")]
pub struct DumpArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub encoding: EncodingArgs,
    #[command(flatten)]
    pub read_only: ReadOnlyArg,
}

/// List the named keyspaces, one per line, in byte order.
///
/// The default keyspace has no name and is not listed. A name that is not
/// UTF-8 needs --hex.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv keyspaces ./my-db\n  \
    turtlekv keyspaces ./my-db --hex")]
pub struct KeyspacesArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Print the names in hex.
    #[arg(long)]
    pub hex: bool,
}

/// Drop the keyspace NAME and every record in it.
///
/// The drop is durable when the command returns: the name is gone, and a
/// keyspace created under it later starts empty. Its records are deleted
/// in the background, while the database is open (by this and later
/// commands); `turtlekv stats` counts the drops still cleaning. Exit code
/// 7 when there is no such keyspace.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  turtlekv drop-keyspace ./my-db users")]
pub struct DropKeyspaceArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// The keyspace's name (UTF-8 text, 1 to 255 bytes).
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// Show the tree, disk use, memory, keyspaces and the last checkpoint.
///
/// Tree height and pages per kind, bytes on disk per file, live data and
/// space amplification (from a full scan), keyspaces (live data and
/// operations of each, drops still cleaning), MemTable and cache sizes,
/// the last checkpoint, the stored options, and what this open did (the
/// engine counts operations per open handle, so write amplification and
/// the keyspaces' operation counts cover this open only).
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv stats ./my-db\n  \
    turtlekv stats ./my-db --json | jq .disk\n  \
    turtlekv stats ./big-db --no-scan")]
pub struct StatsArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Skip the scan that counts live keys and bytes (space amplification
    /// is then left out); for large databases.
    #[arg(long)]
    pub no_scan: bool,
    #[command(flatten)]
    pub read_only: ReadOnlyArg,
}

/// Verify the whole database.
///
/// Every WAL record, every page checksum and the tree's invariants. Exit
/// code 6 and a report naming file and offset on corruption.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv check ./my-db\n  \
    turtlekv check ./my-db --json")]
pub struct CheckArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub read_only: ReadOnlyArg,
}

/// Copy the database into a new directory, while it is in use or not.
///
/// The copy holds the database at one moment, every keyspace included,
/// and opens as a database of its own. Every page copied is verified
/// first (exit code 6 if one is damaged). DEST must not exist or be an
/// empty directory, outside the database; a backup that fails leaves
/// nothing at DEST that opens. A database another process holds open is
/// backed up by that process, asked through the control socket in its
/// directory, while it goes on serving reads and writes.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv backup ./my-db ./my-db.backup\n  \
    turtlekv backup /srv/app/db /backups/db-$(date +%F)")]
pub struct BackupArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// Where the copy goes: a new directory, or an empty one.
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Checkpoint now.
///
/// Moves everything in the MemTable into the tree (a durable checkpoint)
/// and removes the WAL segments it covers.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  turtlekv checkpoint ./my-db")]
pub struct CheckpointArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
}

/// Store tuning knobs for future opens.
///
/// The knobs go to the database's OPTIONS file, which every later open
/// through `Options::load` uses (this tool's included). Without flags,
/// shows them. Sizes take binary units: 4096, 512KiB, 64MiB, 1.5GiB.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv tune ./my-db --checkpoint-distance 64MiB --cache 1GiB\n  \
    turtlekv tune ./my-db")]
pub struct TuneArgs {
    /// Database directory.
    #[arg(value_name = "DB")]
    pub db: PathBuf,
    /// MemTable capacity: bytes of updates gathered per checkpoint.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub checkpoint_distance: Option<u64>,
    /// MemTable capacity while writes come alone (a bulk load); at or below
    /// the checkpoint distance turns the switch off.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub write_only_checkpoint_distance: Option<u64>,
    /// Memory budget shared by the page cache and the MemTables.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache: Option<u64>,
    /// Threads per checkpoint; 0 means one per core.
    #[arg(long, value_name = "N")]
    pub checkpoint_threads: Option<usize>,
    /// Bits per key of the leaf filters; 0 turns filters off.
    #[arg(long, value_name = "N")]
    pub filter_bits: Option<u32>,
    /// Bypass the OS page cache for pages (O_DIRECT).
    #[arg(long, value_name = "BOOL")]
    pub direct_io: Option<bool>,
    /// Size at which a WAL segment is closed and the next begun.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub wal_segment_size: Option<u64>,
    /// Garbage the tree may hold before checkpoints drain buffers for
    /// space, in percent of the live data; 0 turns reclamation off.
    #[arg(long, value_name = "PERCENT")]
    pub garbage_percent: Option<u32>,
    /// Codec of the pages written from now on: none, lz4, zstd or
    /// zstd:<level> (pages already written keep theirs).
    #[arg(long, value_name = "CODEC")]
    pub compression: Option<turtlekv::Compression>,
}

/// Run a short YCSB benchmark on a temporary database.
///
/// The `turtlekv-bench ycsb` driver, TurtleKV only, with small defaults
/// and the engine's built-in options; the database is removed afterwards.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    turtlekv bench\n  \
    turtlekv bench --records 100000 --ops 100000 --workloads load,a,c")]
pub struct BenchArgs {
    /// Records inserted by the load phase.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// Operations per workload.
    #[arg(long, default_value_t = 50_000)]
    pub ops: u64,
    /// Phases to report (the load always runs).
    #[arg(long, value_delimiter = ',', default_value = "load,a,b,c,d,e,f")]
    pub workloads: Vec<Workload>,
    /// Client threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: u16,
    /// Bytes per value (8 to 262144).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(8..=262_144))]
    pub value_size: u32,
    /// Request distribution.
    #[arg(long, value_enum, default_value_t = Distribution::Zipfian)]
    pub distribution: Distribution,
    /// fsync every write.
    #[arg(long)]
    pub sync: bool,
    /// Where the temporary database goes (default: the system temporary
    /// directory); it is removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_has_an_example() {
        for command in Cli::command().get_subcommands() {
            let help = command.get_after_help().map(|h| h.to_string());
            assert!(
                help.is_some_and(|h| h.contains("turtlekv ")),
                "{} has no example",
                command.get_name()
            );
        }
    }
}
