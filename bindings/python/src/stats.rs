//! Statistics and reports as Python dicts.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use turtlekv::{BackupReport, CheckReport, KeyspaceStats, Stats};

/// Sets `dict[name] = value.name` for each field.
macro_rules! fields {
    ($dict:expr, $value:expr, $($name:ident),+ $(,)?) => {
        $( $dict.set_item(stringify!($name), $value.$name)?; )+
    };
}

/// `Db.stats()`: every counter of the engine's `Stats`, its derived
/// ratios, and `keyspaces` (a list of `Keyspace.stats()` dicts).
pub(crate) fn stats<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        s,
        puts,
        deletes,
        range_deletes,
        range_tombstones,
        range_keys_deleted,
        range_deletion_steps,
        gets,
        scans,
        batches,
        user_bytes_written,
        wal_bytes_written,
        wal_syncs,
        wal_group_commits,
        memtable_bytes,
        memtable_entries,
        last_sequence,
        wal_records_replayed,
        wal_tail_bytes_dropped,
        wal_missing_segments,
        wal_recovery_bytes_dropped,
        superblock_slots_damaged,
        wal_segments_trimmed,
        memtables_frozen,
        frozen_memtables,
        checkpoints,
        checkpoint_nanos,
        checkpoint_covered_sequence,
        checkpoint_distance_bytes,
        read_pressure_checkpoints,
        write_stalls,
        write_stall_nanos,
        last_checkpoint_nanos,
        max_checkpoint_nanos,
        heap_trim_nanos,
        memory_budget_bytes,
        cache_capacity_bytes,
        cache_used_bytes,
        cache_pooled_bytes,
        cache_leaf_head_bytes,
        cache_filter_bytes,
        cache_node_bytes,
        cache_frame_bytes,
        cache_frames_released,
        cache_hits,
        cache_misses,
        cache_leaf_head_misses,
        cache_filter_misses,
        cache_evictions,
        cache_ghost_recalls,
        cache_blocks_freed_cached,
        page_bytes_read,
        page_read_ios,
        leaf_pages_written,
        leaf_bytes_written,
        filter_bytes_written,
        checkpoint_spills,
        node_pages_written,
        node_bytes_written,
        page_bytes_written,
        page_bytes_punched,
        dead_chunk_bytes_punched,
        page_syncs,
        tree_height,
        tree_node_pages,
        tree_leaf_pages,
        tree_segment_pages,
        tree_buffered_bytes,
        tree_leaf_page_bytes,
        tree_leaf_capacity_bytes,
        tree_segment_page_bytes,
        space_allocated_bytes,
        space_live_bytes,
        space_garbage_bytes,
        reclaim_flushes,
        record_cache_hits,
        record_cache_misses,
        record_cache_evictions,
        record_cache_refusals,
        record_cache_used_bytes,
        record_cache_capacity_bytes,
        record_cache_ghost_recalls,
        record_cache_resizes,
        get_disk_reads,
        compression_input_bytes,
        compression_output_bytes,
        keyspaces_dropping,
        value_files,
        value_file_bytes,
        value_live_bytes,
        value_records_written,
        value_bytes_written,
        value_reads,
        value_files_judged,
        value_files_moved,
        value_bytes_moved,
        value_files_removed,
        value_moves_abandoned
    );
    d.set_item("disk_reads_per_get", s.disk_reads_per_get())?;
    d.set_item("space_amplification", s.space_amplification())?;
    d.set_item("leaf_fill", s.leaf_fill())?;
    d.set_item("compression_ratio", s.compression_ratio())?;
    d.set_item("write_amplification", s.write_amplification())?;
    let keyspaces = PyList::empty(py);
    for ks in &s.keyspaces {
        keyspaces.append(keyspace_stats(py, ks)?)?;
    }
    d.set_item("keyspaces", keyspaces)?;
    Ok(d)
}

/// `Keyspace.stats()`.
pub(crate) fn keyspace_stats<'py>(
    py: Python<'py>,
    s: &KeyspaceStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", PyBytes::new(py, &s.name))?;
    fields!(d, s, puts, deletes, gets, scans);
    Ok(d)
}

/// `Db.backup()`'s report.
pub(crate) fn backup_report<'py>(
    py: Python<'py>,
    r: &BackupReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        r,
        sequence,
        pages,
        page_bytes,
        log_entries,
        value_files,
        value_file_bytes
    );
    Ok(d)
}

/// `Db.check()`'s report.
pub(crate) fn check_report<'py>(py: Python<'py>, r: &CheckReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    fields!(
        d,
        r,
        wal_segments,
        wal_records,
        wal_bytes,
        memtable_keys,
        range_tombstones,
        tree_keys,
        tree_pages,
        superblock,
        options_file,
        keyspaces,
    );
    Ok(d)
}
