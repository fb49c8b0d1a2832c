//! Command line options and their checks.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::error::ServerError;
use crate::resp::Limits;

/// When a write is made durable, like Redis's `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyncMode {
    /// Each write is acknowledged only once it is on disk (`fdatasync`);
    /// concurrent writers share one sync (group commit).
    Always,
    /// A background thread syncs the log every second: a crash loses at
    /// most about the last second of acknowledged writes.
    Everysec,
    /// The server never syncs on its own; the kernel writes the log back
    /// when it chooses (a process crash loses nothing, a machine crash may).
    No,
}

/// `turtlekv-server`: the Redis protocol over a TurtleKV database.
#[derive(Debug, Clone, Parser)]
#[command(version, about)]
pub struct Config {
    /// Database directory (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6380")]
    pub bind: SocketAddr,
    /// Password clients must give with AUTH (or HELLO ... AUTH) first.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Listen on a non-loopback address without a password.
    #[arg(long)]
    pub allow_unauthenticated: bool,
    /// Durability of acknowledged writes.
    #[arg(long, value_enum, default_value = "everysec")]
    pub sync: SyncMode,
    /// Engine memory budget (page cache, record cache and MemTables), e.g.
    /// `1GiB`, `512MiB`. Default: the engine's.
    #[arg(long, value_parser = parse_size)]
    pub cache: Option<u64>,
    /// How checkpoints compress leaf chunks: `none`, `lz4` (the engine's
    /// default) or `zstd[:level]`. Every read of a compressed chunk
    /// decompresses it: `none` costs the least CPU per cached read,
    /// `lz4` the least memory and disk per key. Default: the engine's.
    #[arg(long)]
    pub compression: Option<turtlekv::Compression>,
    /// Number of databases SELECT reaches (0 is the default keyspace, `n`
    /// the keyspace `db<n>`).
    #[arg(long, default_value_t = 16)]
    pub databases: u32,
    /// Largest bulk string a client may send (bytes, e.g. `256KiB`; the
    /// engine takes values up to 1 GiB, each held in memory while its
    /// request is parsed).
    #[arg(long, value_parser = parse_size, default_value = "256KiB")]
    pub max_bulk_len: u64,
    /// Most arguments in one request.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_multibulk_len: usize,
    /// Most bytes of arguments in one request.
    #[arg(long, value_parser = parse_size, default_value = "64MiB")]
    pub max_request: u64,
    /// Most connections at once; more are refused with an error.
    #[arg(long, default_value_t = 10_000)]
    pub max_clients: usize,
    /// Engine worker threads that run commands (tokio's blocking pool).
    #[arg(long, default_value_t = 64)]
    pub engine_threads: usize,
}

impl Config {
    /// Refuses combinations that would be unsafe or cannot work.
    pub fn validate(&self) -> Result<(), ServerError> {
        if !self.bind.ip().is_loopback()
            && self.requirepass.is_none()
            && !self.allow_unauthenticated
        {
            return Err(ServerError::Config(format!(
                "refusing to listen on {} without --requirepass; pass \
                 --allow-unauthenticated to accept any client",
                self.bind
            )));
        }
        if self.databases == 0 {
            return Err(ServerError::Config("--databases must be at least 1".into()));
        }
        if self.max_bulk_len == 0 || self.max_multibulk_len == 0 || self.engine_threads == 0 {
            return Err(ServerError::Config(
                "--max-bulk-len, --max-multibulk-len and --engine-threads must be positive".into(),
            ));
        }
        Ok(())
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_bulk_len_bytes: usize::try_from(self.max_bulk_len).unwrap_or(usize::MAX),
            max_multibulk_len: self.max_multibulk_len,
            max_request_bytes: usize::try_from(self.max_request).unwrap_or(usize::MAX),
            ..Limits::default()
        }
    }
}

/// A size such as `4096`, `64KiB`, `1GiB`, `1G` or `1gb` (all binary units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 1GiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit `{other}`")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2 mb"), Ok(2 << 20));
        assert!(parse_size("1.5GiB").is_err());
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }

    #[test]
    fn public_bind_needs_a_password_or_an_explicit_opt_out() {
        let parse = |args: &[&str]| {
            let mut all = vec!["turtlekv-server", "--dir", "/tmp/x"];
            all.extend_from_slice(args);
            Config::try_parse_from(all).expect("arguments parse")
        };
        assert!(parse(&[]).validate().is_ok());
        assert!(parse(&["--bind", "0.0.0.0:6380"]).validate().is_err());
        assert!(
            parse(&["--bind", "0.0.0.0:6380", "--requirepass", "s3cret"])
                .validate()
                .is_ok()
        );
        assert!(
            parse(&["--bind", "0.0.0.0:6380", "--allow-unauthenticated"])
                .validate()
                .is_ok()
        );
    }
}
