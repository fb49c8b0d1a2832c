//! The text rendering of `stats`: labelled lines, sizes for people.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;

use super::Report;
use crate::commands::tune::threads;
use crate::size::format_size;

pub(super) fn write_text(r: &Report, out: &mut dyn Write) -> Result<()> {
    let line = |out: &mut dyn Write, label: &str, value: String| -> std::io::Result<()> {
        writeln!(out, "  {label:<28} {value}")
    };
    writeln!(out, "database {}", r.path)?;
    writeln!(out, "tree")?;
    line(out, "height", r.tree.height.to_string())?;
    line(out, "node pages", r.tree.node_pages.to_string())?;
    line(out, "leaf pages", r.tree.leaf_pages.to_string())?;
    line(
        out,
        "buffer segment pages",
        r.tree.buffer_segment_pages.to_string(),
    )?;
    line(out, "buffered in nodes", format_size(r.tree.buffered_bytes))?;
    line(
        out,
        "leaf pages on disk",
        format!(
            "{} ({:.0}% of their slots)",
            format_size(r.tree.leaf_page_bytes),
            r.tree.leaf_fill * 100.0
        ),
    )?;
    line(
        out,
        "segment pages on disk",
        format_size(r.tree.buffer_segment_page_bytes),
    )?;
    line(
        out,
        "live, estimated",
        format_size(r.tree.estimated_live_bytes),
    )?;
    line(
        out,
        "garbage, estimated",
        format!(
            "{} (drained past Options::garbage_percent)",
            format_size(r.tree.estimated_garbage_bytes)
        ),
    )?;
    writeln!(out, "disk (allocated blocks)")?;
    line(out, "total", format_size(r.disk.bytes_on_disk))?;
    for file in &r.disk.files {
        let apparent = if file.len_bytes == file.bytes_on_disk {
            String::new()
        } else {
            format!(" (size {})", format_size(file.len_bytes))
        };
        line(
            out,
            &file.name,
            format!("{}{apparent}", format_size(file.bytes_on_disk)),
        )?;
    }
    line(
        out,
        "wal/",
        format!(
            "{} in {} segments",
            format_size(r.disk.wal_bytes_on_disk),
            r.disk.wal_segments
        ),
    )?;
    line(
        out,
        "values/",
        format!(
            "{} in {} value files",
            format_size(r.disk.value_bytes_on_disk),
            r.disk.value_files
        ),
    )?;
    writeln!(out, "live data")?;
    match &r.live {
        Some(live) => {
            line(out, "keys", live.keys.to_string())?;
            line(out, "keys + values", format_size(live.user_bytes))?;
        }
        None => line(out, "keys", "not counted (--no-scan)".to_string())?,
    }
    line(
        out,
        "space amplification",
        r.space_amplification.map_or_else(
            || "n/a (no live data counted)".to_string(),
            |a| format!("{a:.2} (bytes on disk / live key + value bytes)"),
        ),
    )?;
    writeln!(
        out,
        "keyspaces (operations counted since this open, as the engine counts them)"
    )?;
    line(
        out,
        "drops still cleaning",
        r.keyspaces_dropping.to_string(),
    )?;
    for k in &r.keyspaces {
        let label = match (&k.name, &k.name_base64) {
            (Some(name), _) if name.is_empty() => "default".to_string(),
            (Some(name), _) => format!("{name:?}"),
            (None, base64) => format!("(base64) {}", base64.as_deref().unwrap_or_default()),
        };
        let live = match &k.live {
            Some(live) => format!("{} keys, {}", live.keys, format_size(live.user_bytes)),
            None => "keys not counted".to_string(),
        };
        line(
            out,
            &label,
            format!(
                "{live}; {} puts, {} deletes, {} gets, {} scans",
                k.puts, k.deletes, k.gets, k.scans
            ),
        )?;
    }
    writeln!(out, "memtable")?;
    line(
        out,
        "size",
        format!(
            "{} in {} entries, of {} checkpoint distance",
            format_size(r.memtable.bytes),
            r.memtable.entries,
            format_size(r.memtable.checkpoint_distance_bytes)
        ),
    )?;
    line(
        out,
        "frozen, awaiting checkpoint",
        r.memtable.frozen.to_string(),
    )?;
    writeln!(out, "memory")?;
    line(out, "budget", format_size(r.memory.budget_bytes))?;
    line(
        out,
        "page cache",
        format!(
            "{} used of {}",
            format_size(r.memory.cache_used_bytes),
            format_size(r.memory.cache_capacity_bytes)
        ),
    )?;
    writeln!(out, "last checkpoint")?;
    line(
        out,
        "covers sequence numbers",
        format!(
            "up to {} of {} ({} writes only in the WAL)",
            r.checkpoint.covered_sequence,
            r.checkpoint.last_sequence,
            r.checkpoint
                .last_sequence
                .saturating_sub(r.checkpoint.covered_sequence)
        ),
    )?;
    line(
        out,
        "committed at",
        r.checkpoint
            .committed_unix_secs
            .map_or_else(|| "unknown".to_string(), when),
    )?;
    let o = &r.options;
    writeln!(
        out,
        "options ({})",
        if o.stored {
            "stored in OPTIONS by `turtlekv tune`"
        } else {
            "defaults: no OPTIONS file"
        }
    )?;
    line(
        out,
        "checkpoint distance",
        format_size(o.checkpoint_distance_bytes),
    )?;
    line(
        out,
        "write-only distance",
        format_size(o.write_only_checkpoint_distance_bytes),
    )?;
    line(out, "cache", format_size(o.cache_capacity_bytes))?;
    line(out, "checkpoint threads", threads(o.checkpoint_threads))?;
    line(
        out,
        "filter bits per key",
        o.filter_bits_per_key.to_string(),
    )?;
    line(out, "direct I/O", o.direct_io.to_string())?;
    line(
        out,
        "WAL segment size",
        format_size(o.wal_segment_size_bytes),
    )?;
    line(out, "leaf page size", format_size(o.leaf_size_bytes))?;
    line(out, "compression", o.compression.clone())?;
    line(out, "node page size", format_size(o.node_size_bytes))?;
    let t = &r.this_open;
    writeln!(
        out,
        "this open (the engine counts per open handle, not over the database's life)"
    )?;
    line(
        out,
        "WAL records replayed",
        t.wal_records_replayed.to_string(),
    )?;
    line(
        out,
        "torn WAL tail dropped",
        format_size(t.wal_tail_bytes_dropped),
    )?;
    line(out, "user bytes written", format_size(t.user_bytes_written))?;
    line(
        out,
        "write amplification",
        t.write_amplification.map_or_else(
            || "n/a: nothing written since this open (`load` reports its own)".to_string(),
            |w| format!("{w:.2}"),
        ),
    )?;
    line(
        out,
        "leaf chunks compressed",
        t.compression_ratio.map_or_else(
            || "n/a: no checkpoint wrote a leaf since this open".to_string(),
            |ratio| {
                format!(
                    "{} to {} ({ratio:.2}x)",
                    format_size(t.compression_input_bytes),
                    format_size(t.compression_output_bytes)
                )
            },
        ),
    )?;
    Ok(())
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub(super) fn utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rest = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `secs` since the epoch as a date and how long ago that was.
fn when(secs: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ago = now.saturating_sub(secs);
    let ago = match ago {
        0..120 => format!("{ago} s"),
        120..7200 => format!("{} min", ago / 60),
        7200..172_800 => format!("{} h", ago / 3600),
        _ => format!("{} days", ago / 86_400),
    };
    format!("{} ({ago} ago)", utc(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
