//! Corruption reports name the damaged file and the byte offset in it
//! (`docs/format.md`, "Corruption reports"). A real database (a
//! checkpointed tree, WAL records after the checkpoint, closed cleanly) is
//! damaged at a known byte of each file kind, found by the documented
//! layouts; the operation that meets the damage (open, get, scan,
//! `check()`) must return `Error::Corruption` naming that file and:
//!
//! - *exact*: the offset of the damaged byte itself, where a structural
//!   check fails at the field holding it. To reach those checks past the
//!   page store's block checksums, the test recomputes the damaged
//!   block's checksum (what a crafted file or a writer's bug could leave);
//! - *block*: the start of the 4 KiB page block holding the damaged byte,
//!   where the page store's per-block checksum catches it;
//! - *unit*: the start of the bytes a failed checksum covers (a WAL
//!   record, a leaf page's head, a filter), which byte of them changed no
//!   checksum can tell.
//!
//! Each case says which it expects.

use std::path::{Path, PathBuf};

use turtlekv::{Db, Error, Options, WriteBatch, WriteOptions};

const NODE_SLOT_BYTES: u64 = 4096;
const LEAF_SLOT_BYTES: u64 = 64 * 1024;
/// Page store blocks: 4 KiB, of which the last 8 bytes are a trailer.
const BLOCK_BYTES: u64 = 4096;
const BLOCK_PAYLOAD_BYTES: u64 = BLOCK_BYTES - 8;
/// The page header before a page's contents in its first block.
const PAGE_HEADER_BYTES: u64 = 16;
const RECORDS: u32 = 3000;

fn options() -> Options {
    let mut o = Options::default();
    o.node_size_bytes = NODE_SLOT_BYTES;
    o.leaf_size_bytes = LEAF_SLOT_BYTES;
    // The cases below damage items at their bytes in the page, which
    // chunks stored raw hold; a compressed chunk's damage is reported at
    // its start (`tree::format::leaf` tests cover those).
    o.compression = turtlekv::Compression::None;
    // The layout below (root and leaf past their files' first slots) is
    // the one the two checkpoints give alone: a reclamation step between
    // them would commit a root of its own and free the first slot for the
    // second checkpoint's.
    o.garbage_percent = 0;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The database every case damages a copy of: `RECORDS` puts
/// checkpointed into the tree in two checkpoints (so that the root and
/// some leaves lie past the first slot of their files), then 50 more
/// (other keys, some synced) that live only in the WAL, and a clean close.
fn build(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..RECORDS {
        db.put(key(i), vec![i as u8; 100]).unwrap();
        if i == RECORDS / 2 {
            db.checkpoint_now().unwrap();
        }
    }
    db.checkpoint_now().unwrap();
    for i in 0..50u32 {
        let mut batch = WriteBatch::new();
        batch.put(format!("zz{i:04}"), vec![7u8; 20]);
        db.write(batch, &WriteOptions::new().sync(i % 10 == 0))
            .unwrap();
    }
    db.close().unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes(b[at..at + 2].try_into().unwrap()))
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A page id's slot and block count (`docs/format.md`, "Page id").
fn slot_and_blocks(id: u64) -> (u64, u64) {
    (id & ((1 << 40) - 1), ((id >> 40) & 0xFFFF) + 1)
}

/// Where byte `c` of a page's contents lies in its file, for a page in
/// the slot starting at `slot_at`: past the page header, and past the
/// trailer of every block before it (`docs/format.md`, "Page payload").
fn content_in_file(slot_at: u64, c: u64) -> u64 {
    let stream = PAGE_HEADER_BYTES + c;
    slot_at + stream / BLOCK_PAYLOAD_BYTES * BLOCK_BYTES + stream % BLOCK_PAYLOAD_BYTES
}

/// What the test knows of the database, read from its files.
#[derive(Debug)]
struct Layout {
    /// The root node's page id.
    root: u64,
    /// A leaf a lookup reaches without a segment: its page id,
    /// `head_len` and `filter_len`, its contents, and its first key.
    leaf: u64,
    head_len: u64,
    filter_len: u64,
    leaf_contents: Vec<u8>,
    first_key: Vec<u8>,
    /// The WAL segment holding the records after the checkpoint, and the
    /// offsets of its first record with updates and of that record's
    /// first entry's tag.
    segment: PathBuf,
    record_at: u64,
    tag_at: u64,
}

/// A page's contents, read through its blocks.
fn page_contents(file: &[u8], slot_bytes: u64, id: u64) -> Vec<u8> {
    let (slot, blocks) = slot_and_blocks(id);
    let slot_at = slot * slot_bytes;
    let mut stream = Vec::new();
    for b in 0..blocks {
        let block = &file[(slot_at + b * BLOCK_BYTES) as usize..][..BLOCK_BYTES as usize];
        let used = u32_at(block, BLOCK_PAYLOAD_BYTES as usize) as usize;
        stream.extend_from_slice(&block[..used]);
    }
    let len = u32_at(&stream, 4) as usize;
    assert_eq!(u64_at(&stream, 8), id, "page header names its page");
    stream[PAGE_HEADER_BYTES as usize..][..len].to_vec()
}

/// Reads an unsigned LEB128 integer at `*at`.
fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut value = 0;
    for shift in (0..).step_by(7) {
        let byte = b[*at];
        *at += 1;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

fn layout(dir: &Path) -> Layout {
    // The newest superblock slot names the root.
    let sb = std::fs::read(dir.join("SUPERBLOCK")).unwrap();
    let newest = if u64_at(&sb, 4096 + 16) > u64_at(&sb, 16) {
        4096
    } else {
        0
    };
    let root = u64_at(&sb, newest + 40);
    let nodes = std::fs::read(dir.join("nodes.pages")).unwrap();
    let root_contents = page_contents(&nodes, NODE_SLOT_BYTES, root);
    assert_eq!(&root_contents[..4], b"TKND");
    // A tree of height 1: a lookup goes from the root to a leaf, through
    // the root's segments active for the leaf's pivot.
    assert_eq!(root_contents[5], 1, "root height");
    let pivot_count = u16_at(&root_contents, 6);
    let segment_count = u16_at(&root_contents, 8);
    // Pivots: leaf id, head_len, filter_len, pending bytes, and a key
    // after its length for every pivot but the first.
    let mut at = 20;
    let mut leaves = Vec::new();
    for p in 0..pivot_count {
        let r = &root_contents[at..];
        leaves.push((u64_at(r, 0), u32_at(r, 8), u32_at(r, 12)));
        at += 24;
        if p > 0 {
            at += 2 + u16_at(&root_contents, at);
        }
    }
    // Segments: level, flags, page (16), item count, first pivot, pivot
    // span, the active bits, and flushed bounds (pivot, index, key).
    let mut active = vec![false; pivot_count];
    for _ in 0..segment_count {
        let r = &root_contents[at..];
        let (first, span) = (u16_at(r, 22), u16_at(r, 24));
        let bits = &r[26..26 + span.div_ceil(8)];
        for i in 0..span {
            active[first + i] |= bits[i / 8] >> (i % 8) & 1 == 1;
        }
        at += 26 + span.div_ceil(8);
        let bounds = u16_at(&root_contents, at);
        at += 2;
        for _ in 0..bounds {
            at += 8 + u16_at(&root_contents, at + 6);
        }
    }
    assert_eq!(at, root_contents.len(), "the root parsed to its end");
    // A pivot no segment is active for: a lookup goes straight to its
    // leaf. The last such, whose leaf the second checkpoint wrote.
    let pivot = (0..pivot_count)
        .rfind(|&p| !active[p])
        .expect("a pivot without buffered items");
    let (leaf, head_len, filter_len) = leaves[pivot];
    let leaves = std::fs::read(dir.join("leaves.pages")).unwrap();
    let leaf_contents = page_contents(&leaves, LEAF_SLOT_BYTES, leaf);
    assert_eq!(&leaf_contents[..4], b"TKLF");
    assert!(filter_len > 8, "the leaf has a filter");
    // The leaf's first item (format version 2): tag, value length, key.
    let data_offset = u32_at(&leaf_contents, 32) as usize;
    let item = &leaf_contents[data_offset..];
    assert!(item[0] < 0x80 && item[1] < 0x80, "one-byte lengths");
    let stored_key = &item[2..2 + usize::from(item[0] >> 1)];
    // Stored behind the default keyspace's tag (`docs/format.md`).
    assert_eq!(stored_key[0], 0, "the default keyspace's tag");
    let first_key = stored_key[1..].to_vec();
    // The newest segment with updates holds the records after the
    // checkpoint: header (48 bytes), marker, records.
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segments.sort();
    let (segment, record_at, tag_at) = segments
        .iter()
        .rev()
        .find_map(|path| {
            let bytes = std::fs::read(path).unwrap();
            let mut at = 48;
            while at + 12 <= bytes.len() {
                let len = u32_at(&bytes, at + 4) as usize;
                let mut field = at + 12;
                varint(&bytes, &mut field); // first_seq
                varint(&bytes, &mut field); // synced_through
                if varint(&bytes, &mut field) > 0 {
                    return Some((path.clone(), at as u64, field as u64));
                }
                at += 12 + len;
            }
            None
        })
        .expect("a segment with records");
    Layout {
        root,
        leaf,
        head_len,
        filter_len,
        leaf_contents,
        first_key,
        segment,
        record_at,
        tag_at,
    }
}

/// Sets byte `at` of `file` to `value`.
fn poke(file: &Path, at: u64, value: u8) {
    let mut bytes = std::fs::read(file).unwrap();
    assert_ne!(bytes[at as usize], value, "the poke changes the byte");
    bytes[at as usize] = value;
    std::fs::write(file, bytes).unwrap();
}

fn flip(file: &Path, at: u64) {
    let byte = std::fs::read(file).unwrap()[at as usize];
    poke(file, at, byte ^ 0x10);
}

/// Recomputes the checksum of the page block holding byte `at` of a page
/// file (`docs/format.md`, "Blocks"), so the page store passes the block
/// and the damage reaches the decoder of the page's contents.
fn reseal_block(file: &Path, slot_bytes: u64, id: u64, at: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    let (slot, _) = slot_and_blocks(id);
    let index = (at - slot * slot_bytes) / BLOCK_BYTES;
    let start = (slot * slot_bytes + index * BLOCK_BYTES) as usize;
    let block = &mut bytes[start..start + BLOCK_BYTES as usize];
    let payload = BLOCK_PAYLOAD_BYTES as usize;
    // The database identity (superblock byte 72), then the block's id and
    // index.
    let superblock = std::fs::read(file.with_file_name("SUPERBLOCK")).unwrap();
    let mut seed = superblock[72..80].to_vec();
    seed.extend_from_slice(&id.to_le_bytes());
    seed.extend_from_slice(&(index as u32).to_le_bytes());
    let crc = crc32c::crc32c(&seed);
    let crc = crc32c::crc32c_append(crc, &block[..payload + 4]);
    block[payload + 4..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(file, bytes).unwrap();
}

/// Recomputes a WAL record's checksum (over its length and payload).
fn reseal_record(file: &Path, record_at: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = record_at as usize;
    let len = u32_at(&bytes, at + 4) as usize;
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&bytes[at + 4..at + 8]),
        &bytes[at + 12..at + 12 + len],
    );
    bytes[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(file, bytes).unwrap();
}

/// Asserts that `result` is corruption in `file` at `offset`.
#[track_caller]
fn assert_reported<T: std::fmt::Debug>(
    result: turtlekv::Result<T>,
    file: &Path,
    offset: u64,
    what: &str,
) {
    match result {
        Err(Error::Corruption {
            file: reported,
            offset: at,
            reason,
        }) => {
            assert_eq!(
                reported.canonicalize().ok(),
                file.canonicalize().ok(),
                "{what}: {reason}"
            );
            assert_eq!(at, offset, "{what}: {reason}");
        }
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
}

/// A scan from the first key, to its first error.
fn scan(db: &Db) -> turtlekv::Result<usize> {
    let mut n = 0;
    for pair in db.range::<&[u8], _>(..) {
        pair?;
        n += 1;
    }
    Ok(n)
}

struct Case {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Case {
    fn new(built: &Path) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        copy_dir(built, &path);
        Case { _dir: dir, path }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn open(&self) -> turtlekv::Result<Db> {
        Db::open(&self.path, options())
    }
}

#[test]
fn corruption_reports_name_the_file_and_offset_of_the_damage() {
    let built_dir = tempfile::tempdir().unwrap();
    let built = built_dir.path().join("db");
    build(&built);
    let l = layout(&built);
    let (root_slot, _) = slot_and_blocks(l.root);
    let root_at = root_slot * NODE_SLOT_BYTES;
    let (leaf_slot, _) = slot_and_blocks(l.leaf);
    let leaf_at = leaf_slot * LEAF_SLOT_BYTES;
    // Offsets in the first slot would not show a report that leaves out
    // the slot's own offset.
    assert!(root_slot > 0 && leaf_slot > 0, "{l:?}");
    let leaf_byte = |c: u64| content_in_file(leaf_at, c);
    let segment_name =
        |l: &Layout| Path::new("wal").join(l.segment.file_name().expect("a segment file name"));

    // WAL, unit: a payload byte of a record that the seal proves synced.
    // Open reports the record, whose checksum covers it, at its start.
    let case = Case::new(&built);
    let segment = case.path.join(segment_name(&l));
    flip(&segment, l.tag_at + 1);
    assert_reported(case.open(), &segment, l.record_at, "WAL record checksum");

    // WAL, exact: the record's first entry starts with the value pointer
    // marker (tag 1; its checksum recomputed), before what then reads as a
    // delete's tag. Open reports the entry's tag.
    let case = Case::new(&built);
    let segment = case.path.join(segment_name(&l));
    poke(&segment, l.tag_at, 1);
    reseal_record(&segment, l.record_at);
    assert_reported(case.open(), &segment, l.tag_at, "WAL entry tag");

    // WAL, exact: the segment's header names no database (its second
    // checksum recomputed). Records follow it, so it is no torn creation:
    // open reports the field.
    let case = Case::new(&built);
    let segment = case.path.join(segment_name(&l));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[32..40].fill(0);
    let crc = crc32c::crc32c(&bytes[..40]);
    bytes[40..44].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&segment, bytes).unwrap();
    assert_reported(case.open(), &segment, 32, "WAL header identity");

    // WAL, unit, through `check()`: damage to a live segment while the
    // database is open (its records replayed already).
    let case = Case::new(&built);
    let db = case.open().unwrap();
    let segment = case.path.join(segment_name(&l));
    flip(&segment, l.tag_at + 1);
    assert_reported(db.check(), &segment, l.record_at, "WAL record, check()");
    drop(db);

    // Node page, block: a byte of the root's pivot keys. Open walks the
    // tree from the root and the page store refuses the block.
    let case = Case::new(&built);
    let nodes = case.file("nodes.pages");
    // Pivot 0's entry (leaf id, head and filter lengths, pending bytes)
    // takes 24 bytes after the 20-byte header; pivot 1's key follows its
    // own 24 bytes and its 2-byte length.
    let pivot_key_at = content_in_file(root_at, 20 + 24 + 24 + 2);
    flip(&nodes, pivot_key_at);
    let block_start = pivot_key_at / BLOCK_BYTES * BLOCK_BYTES;
    assert_reported(case.open(), &nodes, block_start, "node block");

    // Node page, exact: the root's format version (block checksum
    // recomputed). Open's walk decodes the node and reports the field.
    let case = Case::new(&built);
    let nodes = case.file("nodes.pages");
    let version_at = content_in_file(root_at, 4);
    poke(&nodes, version_at, 9);
    reseal_block(&nodes, NODE_SLOT_BYTES, l.root, version_at);
    assert_reported(case.open(), &nodes, version_at, "node version");

    // Leaf head, block: a byte of the leaf's chunk index. The page store
    // refuses the block when a get reads the leaf's filter or head.
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    let index_at = leaf_byte(48 + 10);
    flip(&leaves, index_at);
    let db = case.open().unwrap();
    let block_start = index_at / BLOCK_BYTES * BLOCK_BYTES;
    assert_reported(
        db.get(&l.first_key),
        &leaves,
        block_start,
        "leaf head block",
    );
    drop(db);

    // Leaf head, exact: the leaf's magic (block checksum recomputed). A
    // get reads the head and reports the field, as do a scan and check().
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    let magic_at = leaf_byte(0);
    poke(&leaves, magic_at, b'X');
    reseal_block(&leaves, LEAF_SLOT_BYTES, l.leaf, magic_at);
    let db = case.open().unwrap();
    assert_reported(db.get(&l.first_key), &leaves, magic_at, "leaf magic, get");
    assert_reported(scan(&db), &leaves, magic_at, "leaf magic, scan");
    assert_reported(db.check(), &leaves, magic_at, "leaf magic, check()");
    drop(db);

    // Leaf head, unit: a byte of the chunk index (block checksum
    // recomputed) fails the head's own checksum, which covers the head:
    // the start of the leaf's contents.
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    poke(&leaves, index_at, 0xEE);
    reseal_block(&leaves, LEAF_SLOT_BYTES, l.leaf, index_at);
    let db = case.open().unwrap();
    assert_reported(
        db.get(&l.first_key),
        &leaves,
        leaf_byte(0),
        "leaf head checksum",
    );
    drop(db);

    // Leaf chunk, exact: the leaf's first item claims an empty key (block
    // checksum recomputed). A get of its key, a scan and check() each
    // parse it first and report its tag.
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    let data_offset = u32_at(&l.leaf_contents, 32);
    let item_at = leaf_byte(data_offset);
    poke(&leaves, item_at, 1);
    reseal_block(&leaves, LEAF_SLOT_BYTES, l.leaf, item_at);
    let db = case.open().unwrap();
    assert_reported(db.get(&l.first_key), &leaves, item_at, "leaf item, get");
    assert_reported(scan(&db), &leaves, item_at, "leaf item, scan");
    assert_reported(db.check(), &leaves, item_at, "leaf item, check()");
    drop(db);

    // Leaf chunk, block: a value byte of the first item, as rot leaves it.
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    let value_at = leaf_byte(data_offset + 2 + 1 + l.first_key.len() as u64);
    flip(&leaves, value_at);
    let db = case.open().unwrap();
    let block_start = value_at / BLOCK_BYTES * BLOCK_BYTES;
    assert_reported(
        db.get(&l.first_key),
        &leaves,
        block_start,
        "leaf data block",
    );
    drop(db);

    // Leaf chunk, unit: the same value byte with the page block's checksum
    // recomputed. Lookups trust the page store's blocks, so only check()
    // finds it, by the leaf's own checksum of its data block: the start of
    // the block (a leaf's data blocks are the page store's blocks'
    // payloads, so that is the page block's start).
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    flip(&leaves, value_at);
    reseal_block(&leaves, LEAF_SLOT_BYTES, l.leaf, value_at);
    let db = case.open().unwrap();
    assert_reported(db.check(), &leaves, block_start, "leaf data block, check()");
    drop(db);

    // Filter, exact and unit: the fingerprint width (block checksum
    // recomputed). A get probes the filter's structure and reports the
    // field; check() verifies the filter's checksum first, which covers
    // it: the filter's start.
    let case = Case::new(&built);
    let leaves = case.file("leaves.pages");
    let width_at = leaf_byte(l.head_len + 4);
    poke(&leaves, width_at, 9);
    reseal_block(&leaves, LEAF_SLOT_BYTES, l.leaf, width_at);
    let db = case.open().unwrap();
    assert_reported(db.get(&l.first_key), &leaves, width_at, "filter width, get");
    let filter_at = leaf_byte(l.head_len);
    assert_reported(db.check(), &leaves, filter_at, "filter checksum, check()");
    drop(db);
    assert!(l.filter_len > 8);

    // Superblock, exact: slot 0 names a format version this build does
    // not read, or an identity of zero (its checksum recomputed), and slot
    // 1's magic is damaged. With no valid slot over data, open reports the
    // first slot's field.
    for (at, value, what) in [(8, 3, "slot version"), (72, 0, "slot identity")] {
        let case = Case::new(&built);
        let superblock = case.file("SUPERBLOCK");
        let mut bytes = std::fs::read(&superblock).unwrap();
        if at == 72 {
            bytes[72..80].fill(value);
        } else {
            bytes[at] = value;
        }
        let crc = crc32c::crc32c(&bytes[..88]);
        bytes[88..92].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&superblock, bytes).unwrap();
        flip(&superblock, 4096);
        assert_reported(case.open(), &superblock, at as u64, what);
    }

    // Superblock, unit, through `check()`: the older slot's checksum fails
    // while the database is open. Check reports the slot's start.
    let case = Case::new(&built);
    let db = case.open().unwrap();
    let superblock = case.file("SUPERBLOCK");
    let bytes = std::fs::read(&superblock).unwrap();
    let older = if u64_at(&bytes, 4096 + 16) > u64_at(&bytes, 16) {
        0
    } else {
        4096
    };
    flip(&superblock, older + 40);
    assert_reported(db.check(), &superblock, older, "older slot, check()");
    drop(db);
}
