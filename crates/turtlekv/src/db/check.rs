//! `Db::check`: a deep integrity check of everything the database holds.

use std::ops::Bound;

use bytes::Bytes;

use crate::db::DbInner;
use crate::memtable::{Direction, MemTable};
use crate::values::Value;
use crate::{Error, Result};

/// What [`crate::Db::check`] verified. A failed check returns an error
/// instead (`Error::Corruption` naming the file and offset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Live WAL segments read.
    pub wal_segments: u64,
    /// WAL records whose checksums and numbering verified.
    pub wal_records: u64,
    /// WAL bytes read.
    pub wal_bytes: u64,
    /// Keys visible in the MemTables, each in strictly increasing order.
    pub memtable_keys: u64,
    /// Range tombstones in the MemTables, each checked: a non-empty range
    /// within one keyspace, numbered above the tree's checkpoint.
    pub range_tombstones: u64,
    /// Live keys in the tree.
    pub tree_keys: u64,
    /// Tree pages read and verified.
    pub tree_pages: u64,
    /// Both superblock slots were read and agree (`false` for a database
    /// without a tree store).
    pub superblock: bool,
    /// A stored `OPTIONS` file was read and its checksum held.
    pub options_file: bool,
    /// Named keyspaces in the catalog, which was checked.
    pub keyspaces: u64,
    /// Value pointers whose records were read and verified: every one the
    /// MemTables' visible versions and the tree's live records hold.
    pub value_pointers: u64,
}

const CHUNK_KEYS: usize = 4096;

pub(crate) fn check(inner: &std::sync::Arc<DbInner>) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let trees = inner.versions.trees();
    if let Some(trees) = trees {
        trees.check_durable_metadata()?;
        report.superblock = true;
    }
    if let Some((identity, _)) = trees.and_then(|t| t.identity()) {
        report.options_file =
            crate::options_file::check_stored(&*inner.fs, &inner.path, identity.id)?;
    }
    let view = inner.versions.read_view();
    let verification = inner.versions.wal().verification()?;
    let wal = verification.verify()?;
    // Segments gone since their lengths were taken were trimmed by a
    // checkpoint, unless the log still holds them: then they were lost.
    verification.missing(&inner.versions.wal().still_live(&wal.gone))?;
    report.wal_segments = wal.segments;
    report.wal_records = wal.records;
    report.wal_bytes = wal.bytes;
    let covered = view.state.tree.as_ref().map_or(0, |t| t.covered_seq());
    for memtable in view.state.memtables() {
        report.memtable_keys += check_memtable(&**memtable, view.seq)?;
        let tagged = inner.keyspaces.tagged;
        report.range_tombstones += check_range_tombstones(&**memtable, covered, tagged)?;
    }
    if let Some(tree) = &view.state.tree {
        let tree = tree.check()?;
        report.tree_keys = tree.keys;
        report.tree_pages = tree.pages;
    }
    report.keyspaces = inner.keyspaces.check(inner)?;
    if inner.values.stats().files > 0 {
        report.value_pointers = check_value_pointers(inner, &view)?;
    }
    Ok(report)
}

/// Reads and verifies the record of every value pointer the view's
/// MemTables (visible versions) and tree (live records) hold.
fn check_value_pointers(inner: &DbInner, view: &crate::store::ReadView) -> Result<u64> {
    let mut checked = 0;
    let mut verify = |key: &Bytes, value: &Option<Value>| -> Result<()> {
        if let Some(pointer @ Value::Pointer(_)) = value {
            inner.resolve_checked(key, pointer)?;
            checked += 1;
        }
        Ok(())
    };
    let all = Bound::Unbounded;
    for memtable in view.state.memtables() {
        let mut out = Vec::with_capacity(CHUNK_KEYS);
        let mut after: Option<Bytes> = None;
        loop {
            out.clear();
            let lower = after.as_deref().map_or(all, Bound::Excluded);
            memtable.scan(
                lower,
                all,
                view.seq,
                Direction::Forward,
                CHUNK_KEYS,
                &mut out,
            );
            for (key, value) in &out {
                verify(key, value)?;
            }
            after = out.last().map(|(key, _)| key.clone());
            if out.len() < CHUNK_KEYS {
                break;
            }
        }
    }
    if let Some(tree) = &view.state.tree {
        let mut cursor = tree.cursor(Bound::Unbounded, Bound::Unbounded, Direction::Forward);
        let mut out = Vec::with_capacity(CHUNK_KEYS);
        loop {
            out.clear();
            cursor.fill(CHUNK_KEYS, &mut out)?;
            for (key, value) in &out {
                verify(key, value)?;
            }
            if out.len() < CHUNK_KEYS {
                break;
            }
        }
    }
    Ok(checked)
}

/// Checks what `check_structure` cannot know of a MemTable's range
/// tombstones: each lies within one keyspace (its ends share a tag, in a
/// database with keyspaces) and is newer than the tree, whose checkpoint
/// has not applied it. Returns how many there are.
fn check_range_tombstones(memtable: &dyn MemTable, covered_seq: u64, tagged: bool) -> Result<u64> {
    let tombstones = memtable.range_tombstones().all();
    for t in &tombstones {
        let fail = |reason: String| Error::Corruption {
            file: "<memtable>".into(),
            offset: 0,
            reason,
        };
        if t.seq <= covered_seq {
            return Err(fail(format!(
                "range tombstone at sequence {} is not above the checkpoint's {covered_seq}",
                t.seq
            )));
        }
        if tagged && stored_tag(&t.start) != stored_tag(&t.end) {
            return Err(fail(format!(
                "range tombstone at sequence {} spans keyspaces",
                t.seq
            )));
        }
    }
    Ok(tombstones.len() as u64)
}

/// The keyspace tag a stored key starts with (`format.md`, "Keys and
/// keyspaces": one byte below `F0`, else `F0` and four bytes).
fn stored_tag(key: &[u8]) -> &[u8] {
    match key.first() {
        Some(&b) if b < 0xF0 => &key[..1],
        _ => &key[..key.len().min(5)],
    }
}

/// Checks the MemTable's structure, then scans it and checks the order
/// its keys come out in.
fn check_memtable(memtable: &dyn MemTable, seq: u64) -> Result<u64> {
    memtable
        .check_structure()
        .map_err(|reason| Error::Corruption {
            file: "<memtable>".into(),
            offset: 0,
            reason,
        })?;
    let mut keys = 0;
    let mut previous: Option<Bytes> = None;
    loop {
        let lower = previous
            .as_ref()
            .map_or(Bound::Unbounded, |k| Bound::Excluded(&k[..]));
        let mut out = Vec::with_capacity(CHUNK_KEYS);
        memtable.scan(
            lower,
            Bound::Unbounded,
            seq,
            Direction::Forward,
            CHUNK_KEYS,
            &mut out,
        );
        for (key, _) in &out {
            if previous.as_ref().is_some_and(|p| p >= key) {
                return Err(Error::Corruption {
                    file: "<memtable>".into(),
                    offset: keys,
                    reason: format!("key {key:?} out of order"),
                });
            }
            previous = Some(key.clone());
            keys += 1;
        }
        if out.len() < CHUNK_KEYS {
            return Ok(keys);
        }
    }
}
