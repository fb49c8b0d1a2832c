//! `INFO`: the server's counters and the engine's (`Db::stats`), in Redis's
//! `# Section` / `field:value` text.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use turtlekv::Result;

use super::keys::count_keys;
use super::{Call, is};
use crate::config::SyncMode;
use crate::store::Space;

pub fn info(c: &mut Call<'_, '_>) -> Result<()> {
    let wanted: Vec<String> = c.args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || c.args[1..]
            .iter()
            .any(|a| is(a, "all") || is(a, "everything") || is(a, "default"));
    let include = |section: &str| all || wanted.iter().any(|w| w == section);
    let shared = c.shared;
    let counters = &shared.counters;
    let mut text = String::new();
    // Writing to a String cannot fail.
    if include("server") {
        let _ = write!(
            text,
            "# Server\r\nredis_version:{}\r\nturtlekv_version:{}\r\nredis_mode:standalone\r\n\
             process_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\r\n",
            super::admin::REDIS_COMPAT_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            shared.config.bind.port(),
            shared.started.elapsed().as_secs(),
        );
    }
    if include("clients") {
        let _ = write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            counters.connections_current.load(Ordering::Relaxed),
            shared.config.max_clients,
        );
    }
    let stats = shared.db.stats();
    if include("persistence") {
        let sync = match shared.config.sync {
            SyncMode::Always => "always",
            SyncMode::Everysec => "everysec",
            SyncMode::No => "no",
        };
        let _ = write!(
            text,
            "# Persistence\r\nloading:0\r\naof_enabled:1\r\nappendfsync:{sync}\r\n\
             wal_syncs:{}\r\nwal_group_commits:{}\r\ncheckpoints:{}\r\n\r\n",
            stats.wal_syncs, stats.wal_group_commits, stats.checkpoints,
        );
    }
    if include("stats") {
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\n\
             total_commands_processed:{}\r\ntxn_conflict_retries:{}\r\nexec_watch_aborts:{}\r\n\
             protocol_errors:{}\r\n\r\n",
            counters.connections_total.load(Ordering::Relaxed),
            counters.connections_rejected.load(Ordering::Relaxed),
            counters.commands.load(Ordering::Relaxed),
            counters.txn_retries.load(Ordering::Relaxed),
            counters.exec_aborts.load(Ordering::Relaxed),
            counters.protocol_errors.load(Ordering::Relaxed),
        );
    }
    if include("turtlekv") {
        let fields: [(&str, u64); 20] = [
            ("puts", stats.puts),
            ("deletes", stats.deletes),
            ("gets", stats.gets),
            ("scans", stats.scans),
            ("batches", stats.batches),
            ("user_bytes_written", stats.user_bytes_written),
            ("wal_bytes_written", stats.wal_bytes_written),
            ("memtable_bytes", stats.memtable_bytes),
            ("memtable_entries", stats.memtable_entries),
            ("last_sequence", stats.last_sequence),
            ("write_stalls", stats.write_stalls),
            ("memory_budget_bytes", stats.memory_budget_bytes),
            ("cache_capacity_bytes", stats.cache_capacity_bytes),
            ("cache_used_bytes", stats.cache_used_bytes),
            ("cache_hits", stats.cache_hits),
            ("cache_misses", stats.cache_misses),
            ("record_cache_hits", stats.record_cache_hits),
            ("record_cache_misses", stats.record_cache_misses),
            ("page_bytes_read", stats.page_bytes_read),
            ("space_allocated_bytes", stats.space_allocated_bytes),
        ];
        text.push_str("# TurtleKV\r\n");
        for (name, value) in fields {
            let _ = write!(text, "{name}:{value}\r\n");
        }
        let _ = write!(
            text,
            "tree_height:{}\r\nspace_amplification:{:.3}\r\nwrite_amplification:{:.3}\r\n\r\n",
            stats.tree_height,
            stats.space_amplification(),
            stats.write_amplification(),
        );
    }
    if include("keyspace") {
        text.push_str("# Keyspace\r\n");
        let keys = count_keys(&Space::Default, &shared.db)?;
        if keys > 0 {
            let _ = write!(text, "db0:keys={keys},expires=0,avg_ttl=0\r\n");
        }
        for ks in &stats.keyspaces {
            if let Some(index) = std::str::from_utf8(&ks.name)
                .ok()
                .and_then(|n| n.strip_prefix("db"))
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&i| i > 0)
                && let Ok(space) = shared.space(index)
            {
                let keys = count_keys(&space, &shared.db)?;
                if keys > 0 {
                    let _ = write!(text, "db{index}:keys={keys},expires=0,avg_ttl=0\r\n");
                }
            }
        }
    }
    c.reply.verbatim(&text);
    Ok(())
}
