//! `delete_range`: what reads see, in every place data lives (MemTables,
//! tree, record cache, snapshots, transactions, keyspaces), after reopening
//! and after checkpoints; bad ranges; and a range too large for one update.

mod common;

use std::time::{Duration, Instant};

use common::{checkpointing_options, contents, open_fault, small_options};
use turtlekv::io::FaultFs;
use turtlekv::{Db, Error, MAX_KEY_SIZE, Options, WriteBatch, WriteOptions};

const SYNC: WriteOptions = WriteOptions::new().sync(true);

fn keys(db: &Db) -> Vec<Vec<u8>> {
    contents(db).into_keys().collect()
}

fn fill(db: &Db, keys: &[&str]) {
    for k in keys {
        db.put(k, format!("v-{k}")).unwrap();
    }
}

fn strs(keys: &[&str]) -> Vec<Vec<u8>> {
    keys.iter().map(|k| k.as_bytes().to_vec()).collect()
}

#[test]
fn gets_and_scans_both_ways_honour_a_range_deletion_at_once() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    fill(&db, &["a", "b", "ba", "c", "d", "e"]);
    db.delete_range("b", "d").unwrap();
    assert_eq!(db.get("b").unwrap(), None);
    assert_eq!(db.get("ba").unwrap(), None);
    assert_eq!(db.get("c").unwrap(), None);
    assert_eq!(db.get("d").unwrap().unwrap(), "v-d", "the end is excluded");
    assert_eq!(keys(&db), strs(&["a", "d", "e"]));
    let reverse: Vec<_> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|kv| kv.unwrap().0.to_vec())
        .collect();
    assert_eq!(reverse, strs(&["e", "d", "a"]));
    assert_eq!(db.prefix("b").count(), 0);
    // A put after the deletion is visible.
    db.put("c", "again").unwrap();
    assert_eq!(db.get("c").unwrap().unwrap(), "again");
    assert_eq!(keys(&db), strs(&["a", "c", "d", "e"]));
    let stats = db.stats();
    assert_eq!((stats.range_deletes, stats.range_tombstones), (1, 1));
    let report = db.check().unwrap();
    assert_eq!(report.range_tombstones, 1);
}

#[test]
fn a_batch_applies_its_entries_in_order_around_a_range_deletion() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    fill(&db, &["k1", "k2", "k3"]);
    let mut batch = WriteBatch::new();
    batch.put("k4", "before");
    batch.delete_range("k", "l");
    batch.put("k2", "after");
    db.write(batch, &SYNC).unwrap();
    assert_eq!(keys(&db), strs(&["k2"]));
    assert_eq!(db.get("k2").unwrap().unwrap(), "after");
    drop(db);
    let db = open_fault(&fs, small_options()).unwrap();
    assert_eq!(
        keys(&db),
        strs(&["k2"]),
        "replay rebuilds the tombstone in order"
    );
    db.check().unwrap();
}

#[test]
fn snapshots_before_a_range_deletion_keep_seeing_the_keys() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let names: Vec<String> = (0..300).map(|i| format!("key{i:04}")).collect();
    for n in &names {
        db.put(n, n).unwrap();
    }
    db.checkpoint_now().unwrap();
    let before = db.snapshot();
    db.delete_range("key0100", "key0200").unwrap();
    let after = db.snapshot();
    for snap in [&before, &after] {
        let deleted = std::ptr::eq(snap, &after);
        assert_eq!(snap.get("key0150").unwrap().is_none(), deleted);
        assert_eq!(
            snap.range::<&[u8], _>(..).count(),
            if deleted { 200 } else { 300 }
        );
    }
    // A checkpoint applies the deletion to the tree; the snapshots' views
    // do not change.
    db.checkpoint_now().unwrap();
    assert_eq!(db.stats().range_tombstones, 0);
    assert_eq!(before.range::<&[u8], _>(..).count(), 300);
    assert_eq!(before.get("key0199").unwrap().unwrap(), "key0199");
    assert_eq!(after.range::<&[u8], _>(..).rev().count(), 200);
    assert_eq!(db.range::<&[u8], _>(..).count(), 200);
    assert_eq!(db.get("key0100").unwrap(), None);
    assert_eq!(db.get("key0200").unwrap().unwrap(), "key0200");
    drop((before, after));
    assert_eq!(db.check().unwrap().tree_keys, 200);
}

#[test]
fn empty_inverted_and_bad_ranges_are_refused_and_change_nothing() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    fill(&db, &["a", "b"]);
    let before = db.stats().last_sequence;
    let invalid = |r: turtlekv::Result<()>| matches!(r, Err(Error::InvalidRange { .. }));
    assert!(invalid(db.delete_range("b", "b")));
    assert!(invalid(db.delete_range("b", "a")));
    assert!(matches!(db.delete_range("", "b"), Err(Error::EmptyKey)));
    assert!(matches!(db.delete_range("a", ""), Err(Error::EmptyKey)));
    let long = vec![b'z'; MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.delete_range("a", &long),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        db.delete_range(&long, "a"),
        Err(Error::KeyTooLarge { .. })
    ));
    // A bad range fails its whole batch.
    let mut batch = WriteBatch::new();
    batch.put("c", "1").delete_range("z", "y");
    assert!(invalid(db.write(batch, &SYNC)));
    assert_eq!(db.stats().last_sequence, before);
    assert_eq!(keys(&db), strs(&["a", "b"]));
    let ks = db.keyspace("ks").unwrap();
    assert!(invalid(ks.delete_range("b", "a")));
}

#[test]
fn a_range_deletion_in_a_keyspace_touches_no_other_keyspace() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for k in ["\x00", "m", "\u{7f}", "zz"] {
        db.put(k, "default").unwrap();
        a.put(k, "a").unwrap();
        b.put(k, "b").unwrap();
    }
    db.put([0xff, 0xff], "default").unwrap();
    b.put([0xff, 0xff], "b").unwrap();
    // Wider than every key of the test: the keyspace's whole key space.
    let top = vec![0xff; 8];
    a.delete_range([0u8], &top).unwrap();
    assert_eq!(a.range::<&[u8], _>(..).count(), 0);
    assert_eq!(b.range::<&[u8], _>(..).count(), 5);
    assert_eq!(db.range::<&[u8], _>(..).count(), 5);
    db.checkpoint_now().unwrap();
    assert_eq!(b.range::<&[u8], _>(..).rev().count(), 5);
    assert_eq!(db.get([0xff, 0xff]).unwrap().unwrap(), "default");
    // The default keyspace's range stops below the catalog and named keyspaces.
    db.delete_range([0u8], &top).unwrap();
    assert_eq!(db.range::<&[u8], _>(..).count(), 0);
    assert_eq!(b.get("m").unwrap().unwrap(), "b");
    assert_eq!(db.keyspace_names().unwrap().len(), 2);
    let mut batch = WriteBatch::new();
    batch.delete_range_in(&b, "a", "n").put_in(&b, "c", "new");
    db.write(batch, &SYNC).unwrap();
    let left: Vec<_> = b
        .range::<&[u8], _>(..)
        .map(|kv| kv.unwrap().0.to_vec())
        .collect();
    let want = [&[0][..], b"c", b"zz", &[0x7f], &[0xff, 0xff]];
    assert_eq!(left, want.map(<[u8]>::to_vec));
    assert_eq!(a.stats().deletes, 1);
    drop((a, b));
    drop(db);
    let db = open_fault(&fs, checkpointing_options()).unwrap();
    let b = db.keyspace("b").unwrap();
    assert_eq!(b.range::<&[u8], _>(..).count(), 5);
    assert_eq!(db.keyspace("a").unwrap().range::<&[u8], _>(..).count(), 0);
    db.check().unwrap();
}

#[test]
fn hot_keys_cached_from_the_tree_are_deleted_too() {
    let fs = FaultFs::new();
    let mut options = small_options();
    options.record_cache_capacity_bytes = 1 << 20;
    let db = open_fault(&fs, options).unwrap();
    fill(&db, &["h1", "h2", "h3"]);
    db.checkpoint_now().unwrap();
    for _ in 0..5 {
        for k in ["h1", "h2", "h3"] {
            db.get(k).unwrap().unwrap();
        }
    }
    assert!(db.stats().record_cache_hits > 0, "the keys are cached");
    db.delete_range("h1", "h3").unwrap();
    assert_eq!(db.get("h1").unwrap(), None);
    assert_eq!(db.get("h2").unwrap(), None);
    assert_eq!(db.get("h3").unwrap().unwrap(), "v-h3");
    db.checkpoint_now().unwrap();
    assert_eq!(db.get("h2").unwrap(), None);
}

#[test]
fn transactions_see_range_deletions_and_conflict_with_concurrent_ones() {
    let fs = FaultFs::new();
    let db = open_fault(&fs, small_options()).unwrap();
    fill(&db, &["t1", "t2", "t3", "u1"]);
    db.delete_range("t1", "t3").unwrap();
    // Committed deletions are seen.
    let txn = db.transaction();
    assert_eq!(txn.get("t2").unwrap(), None);
    assert_eq!(txn.range::<&[u8], _>(..).count(), 2);
    drop(txn);
    // A key read, then deleted by a concurrent range deletion.
    let mut txn = db.transaction();
    assert!(txn.get("t3").unwrap().is_some());
    txn.put("other", "x");
    db.delete_range("t3", "t4").unwrap();
    assert!(matches!(
        txn.commit(&WriteOptions::default()),
        Err(Error::Conflict(_))
    ));
    // A range read that a deletion meets, even one that held no key.
    fill(&db, &["w1"]);
    let mut txn = db.transaction();
    assert_eq!(txn.range("v".as_bytes().."w".as_bytes()).count(), 0);
    txn.put("other", "x");
    db.delete_range("vv", "vz").unwrap();
    assert!(matches!(
        txn.commit(&WriteOptions::default()),
        Err(Error::Conflict(_))
    ));
    // A deletion elsewhere does not conflict.
    let mut txn = db.transaction();
    assert!(txn.get("u1").unwrap().is_some());
    txn.put("u1", "y");
    db.delete_range("a", "b").unwrap();
    txn.commit(&WriteOptions::default()).unwrap();
    assert_eq!(db.get("u1").unwrap().unwrap(), "y");
    assert_eq!(db.get("other").unwrap(), None);
}

#[test]
fn synced_range_deletions_survive_reopening_and_checkpoints() {
    let fs = FaultFs::new();
    let options = checkpointing_options();
    let db = open_fault(&fs, options.clone()).unwrap();
    for i in 0..2000u32 {
        db.put(i.to_be_bytes(), [7u8; 20]).unwrap();
    }
    db.delete_range_opt(100u32.to_be_bytes(), 1900u32.to_be_bytes(), &SYNC)
        .unwrap();
    drop(db);
    let db = open_fault(&fs, options.clone()).unwrap();
    assert_eq!(db.range::<&[u8], _>(..).count(), 200);
    db.checkpoint_now().unwrap();
    drop(db);
    let db = open_fault(&fs, options).unwrap();
    assert_eq!(db.range::<&[u8], _>(..).count(), 200);
    assert_eq!(db.get(1000u32.to_be_bytes()).unwrap(), None);
    assert_eq!(db.check().unwrap().tree_keys, 200);
}

/// 200,000 keys in the tree, deleted by one range deletion: the checkpoint
/// reads them in chunks of a leaf's worth of tombstones, each committed as an
/// update of its own, so it never holds all of them; the range is then
/// drained and its pages freed.
#[test]
fn a_huge_range_deletes_in_bounded_steps_and_gives_its_space_back() {
    const KEYS: u32 = 200_000;
    let fs = FaultFs::new();
    let mut options: Options = small_options();
    options.checkpoint_distance_bytes = 4 << 20;
    options.cache_capacity_bytes = 64 << 20;
    options.compression = turtlekv::Compression::None;
    let db = open_fault(&fs, options).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..KEYS {
        batch.put(format!("row{i:08}"), [i as u8; 40]);
        if batch.len() == 10_000 {
            db.write(std::mem::take(&mut batch), &WriteOptions::default())
                .unwrap();
        }
    }
    db.put("zz-kept", "yes").unwrap();
    db.checkpoint_now().unwrap();
    let before = db.stats();
    assert_eq!(db.check().unwrap().tree_keys, u64::from(KEYS) + 1);

    db.delete_range("row", "rox").unwrap();
    assert_eq!(db.range::<&[u8], _>(..).count(), 1);
    assert_eq!(db.get("row00012345").unwrap(), None);
    db.checkpoint_now().unwrap();
    let stats = db.stats();
    assert_eq!(stats.range_keys_deleted, u64::from(KEYS));
    // 12 bytes of key (tag included) plus 64 of overhead each: 15 MB of
    // tombstones in chunks of a 2 MiB leaf, all but the last committed on
    // their own.
    assert!(
        (6..=8).contains(&stats.range_deletion_steps),
        "{} steps",
        stats.range_deletion_steps
    );
    assert_eq!(db.range::<&[u8], _>(..).count(), 1);

    // The drain the deletion asked for flushes the tombstones to the leaves.
    let deadline = Instant::now() + Duration::from_secs(120);
    while db.stats().keyspaces_dropping > 0 {
        assert!(Instant::now() < deadline, "the range was not drained");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its last step's freed pages are punched after that step commits,
    // and the space policy may take steps of its own on what is left:
    // the space comes back once those settle.
    while db.stats().space_allocated_bytes * 4 >= before.space_allocated_bytes {
        assert!(
            Instant::now() < deadline,
            "{} bytes allocated before the deletion, {} after",
            before.space_allocated_bytes,
            db.stats().space_allocated_bytes
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(db.check().unwrap().tree_keys, 1);
    assert_eq!(db.get("zz-kept").unwrap().unwrap(), "yes");
}

/// Two writers each replace their whole group of keys in every batch: a
/// range deletion of the group, then 1 to 8 keys carrying the batch's
/// counter. Snapshots and gets, taken while MemTables holding range
/// tombstones freeze and are checkpointed, must see whole batches: as
/// many keys as the counter says, all with its value.
#[test]
fn snapshots_see_whole_replacements_while_range_deletions_are_checkpointed() {
    const BATCHES: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.checkpoint_distance_bytes = 64 << 10;
    let db = Db::open(dir.path(), options).unwrap();
    let keys_for = |counter: u64| 1 + counter % 8;
    let writers: Vec<_> = (0..2u8)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for counter in 1..=BATCHES {
                    let mut batch = WriteBatch::new();
                    batch.delete_range([b'w', w], [b'w', w + 1]);
                    for i in 0..keys_for(counter) {
                        batch.put([b'w', w, i as u8], counter.to_be_bytes());
                    }
                    db.write(batch, &WriteOptions::default()).unwrap();
                }
            })
        })
        .collect();
    let check = |pairs: Vec<(turtlekv::Bytes, turtlekv::Bytes)>, w: u8| {
        let values: Vec<u64> = pairs
            .iter()
            .filter(|(k, _)| k[1] == w)
            .map(|(_, v)| u64::from_be_bytes(v[..].try_into().unwrap()))
            .collect();
        if let Some(&counter) = values.first() {
            assert!(
                values.iter().all(|&v| v == counter),
                "mixed batches: {values:?}"
            );
            assert_eq!(
                values.len() as u64,
                keys_for(counter),
                "keys of batch {counter}"
            );
        }
    };
    let mut rounds = 0u64;
    while writers.iter().any(|t| !t.is_finished()) || rounds == 0 {
        rounds += 1;
        let snap = db.snapshot();
        let pairs: Vec<_> = snap.range::<&[u8], _>(..).map(Result::unwrap).collect();
        let mut reversed: Vec<_> = snap
            .range::<&[u8], _>(..)
            .rev()
            .map(Result::unwrap)
            .collect();
        reversed.reverse();
        assert_eq!(pairs, reversed);
        for w in 0..2 {
            check(pairs.clone(), w);
            // Point reads of the snapshot agree with its scan.
            for i in 0..8u8 {
                let scanned = pairs.iter().find(|(k, _)| k[..] == [b'w', w, i]);
                let got = snap.get([b'w', w, i]).unwrap();
                assert_eq!(got.as_ref(), scanned.map(|(_, v)| v));
            }
        }
    }
    for t in writers {
        t.join().unwrap();
    }
    let stats = db.stats();
    assert!(stats.checkpoints >= 5, "{} checkpoints", stats.checkpoints);
    assert_eq!(stats.range_deletes, 2 * BATCHES);
    for w in 0..2 {
        check(db.range::<&[u8], _>(..).map(Result::unwrap).collect(), w);
    }
    eprintln!(
        "{rounds} snapshot rounds over {} checkpoints",
        stats.checkpoints
    );
    db.check().unwrap();
}
