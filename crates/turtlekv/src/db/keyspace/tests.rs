//! Keyspaces through the public API: isolation, atomic batches across
//! keyspaces, snapshots, drops and their cleaning, names, old databases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::checkpointing_test_options;
use crate::io::FaultFs;
use crate::{Db, Error, WriteBatch, WriteOptions};

const DIR: &str = "/db";

fn open(fs: &FaultFs) -> Db {
    Db::open_with_fs(DIR, checkpointing_test_options(), Arc::new(fs.clone())).unwrap()
}

fn all(iter: crate::Iter) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|kv| {
        let (k, v) = kv.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    items
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

fn wait_for_cleaning(db: &Db) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().keyspaces_dropping > 0 {
        assert!(Instant::now() < deadline, "the cleaner did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn keyspaces_hold_the_same_keys_apart_and_survive_a_reopen() {
    let fs = FaultFs::new();
    let db = open(&fs);
    let users = db.keyspace("users").unwrap();
    let orders = db.keyspace(b"orders").unwrap();
    db.put("k", "default").unwrap();
    users.put("k", "user").unwrap();
    orders.put("k", "order").unwrap();
    users.put("k2", "user2").unwrap();
    assert_eq!(db.get("k").unwrap().unwrap(), "default");
    assert_eq!(users.get("k").unwrap().unwrap(), "user");
    assert_eq!(orders.get("k").unwrap().unwrap(), "order");
    assert_eq!(orders.get("k2").unwrap(), None);
    assert_eq!(all(db.range::<&[u8], _>(..)), pairs(&[("k", "default")]));
    assert_eq!(
        all(users.range::<&[u8], _>(..)),
        pairs(&[("k", "user"), ("k2", "user2")])
    );
    let reversed: Vec<_> = users.prefix("k").rev().map(|kv| kv.unwrap().0).collect();
    assert_eq!(reversed, vec![&b"k2"[..], &b"k"[..]]);
    assert_eq!(
        db.keyspace_names().unwrap(),
        vec![b"orders".to_vec(), b"users".to_vec()]
    );
    users.delete("k").unwrap();
    // Checkpoints move all of it into the tree; the rest stays in the WAL.
    for i in 0..300u32 {
        orders.put(i.to_be_bytes(), [7; 40]).unwrap();
    }
    db.checkpoint_now().unwrap();
    orders.put("late", "wal only").unwrap();
    let stats = db.stats();
    assert_eq!(stats.keyspaces.len(), 3, "default, orders, users");
    assert_eq!(
        (stats.keyspaces[1].name.as_slice(), stats.keyspaces[1].puts),
        (&b"orders"[..], 302)
    );
    assert_eq!(
        (stats.keyspaces[2].puts, stats.keyspaces[2].deletes),
        (2, 1)
    );
    drop((users, orders, db));

    let db = open(&fs);
    db.check().unwrap();
    assert_eq!(
        db.keyspace_names().unwrap(),
        vec![b"orders".to_vec(), b"users".to_vec()]
    );
    let users = db.keyspace("users").unwrap();
    let orders = db.keyspace("orders").unwrap();
    assert_eq!(all(users.range::<&[u8], _>(..)), pairs(&[("k2", "user2")]));
    assert_eq!(orders.get("late").unwrap().unwrap(), "wal only");
    assert_eq!(orders.range::<&[u8], _>(..).count(), 302);
    assert_eq!(db.get("k").unwrap().unwrap(), "default");
}

#[test]
fn a_batch_is_atomic_across_keyspaces_and_snapshots_see_them_at_one_point() {
    let fs = FaultFs::new();
    let db = open(&fs);
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put_in(&a, "x", "1")
        .put_in(&b, "x", "2")
        .put("x", "0");
    db.write(batch, &WriteOptions::new().sync(true)).unwrap();
    let snapshot = db.snapshot();
    let mut batch = WriteBatch::new();
    batch
        .delete_in(&a, "x")
        .put_in(&b, "x", "3")
        .put_in(&b, "y", "4");
    db.write(batch, &WriteOptions::default()).unwrap();
    assert_eq!(snapshot.get_in(&a, "x").unwrap().unwrap(), "1");
    assert_eq!(snapshot.get_in(&b, "x").unwrap().unwrap(), "2");
    assert_eq!(snapshot.get("x").unwrap().unwrap(), "0");
    assert_eq!(
        all(snapshot.range_in(&b, ..b"z".as_slice())),
        pairs(&[("x", "2")])
    );
    assert_eq!(all(snapshot.prefix_in(&a, "x")), pairs(&[("x", "1")]));
    assert_eq!(a.get("x").unwrap(), None);
    assert_eq!(
        all(b.range::<&[u8], _>(..)),
        pairs(&[("x", "3"), ("y", "4")])
    );
}

#[test]
fn a_dropped_keyspace_fails_its_handles_starts_empty_again_and_is_cleaned() {
    let fs = FaultFs::new();
    let db = open(&fs);
    let keep = db.keyspace("keep").unwrap();
    let gone = db.keyspace("gone").unwrap();
    for i in 0..2_000u32 {
        gone.put(i.to_be_bytes(), [1; 64]).unwrap();
        keep.put(i.to_be_bytes(), [2; 8]).unwrap();
    }
    let snapshot = db.snapshot();
    let iter = gone.range::<&[u8], _>(..);
    db.drop_keyspace("gone").unwrap();
    assert!(matches!(gone.get([0; 4]), Err(Error::KeyspaceDropped(name)) if name == b"gone"));
    assert!(matches!(gone.put("k", "v"), Err(Error::KeyspaceDropped(_))));
    assert!(matches!(
        snapshot.get_in(&gone, [0; 4]),
        Err(Error::KeyspaceDropped(_))
    ));
    let mut scan = gone.range::<&[u8], _>(..);
    assert!(matches!(scan.next(), Some(Err(Error::KeyspaceDropped(_)))));
    assert!(scan.next().is_none());
    // An iterator opened before the drop reads its own point in time.
    assert_eq!(iter.count(), 2_000);
    let mut batch = WriteBatch::new();
    batch.put_in(&keep, "a", "b").put_in(&gone, "a", "b");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::KeyspaceDropped(_))
    ));
    assert_eq!(keep.get("a").unwrap(), None, "nothing of a failed batch");
    assert!(matches!(
        db.drop_keyspace("gone"),
        Err(Error::KeyspaceNotFound(_))
    ));
    assert_eq!(db.keyspace_names().unwrap(), vec![b"keep".to_vec()]);

    let again = db.keyspace("gone").unwrap();
    assert_eq!(again.range::<&[u8], _>(..).count(), 0);
    again.put("fresh", "1").unwrap();
    wait_for_cleaning(&db);
    db.checkpoint_now().unwrap();
    let report = db.check().unwrap();
    assert_eq!(
        report.tree_keys,
        2_000 + 1 + 3,
        "keep's keys, the new keyspace's, and the catalog's two names and next id"
    );
    drop((snapshot, scan, gone, again, keep, db));
    let db = open(&fs);
    assert_eq!(
        db.keyspace("gone").unwrap().range::<&[u8], _>(..).count(),
        1
    );
    assert_eq!(
        db.keyspace("keep").unwrap().range::<&[u8], _>(..).count(),
        2_000
    );
}

#[test]
fn a_drop_interrupted_by_a_close_is_cleaned_after_the_reopen() {
    let fs = FaultFs::new();
    let db = open(&fs);
    let gone = db.keyspace("gone").unwrap();
    for i in 0..20_000u32 {
        gone.put(i.to_be_bytes(), [1; 16]).unwrap();
    }
    db.drop_keyspace("gone").unwrap();
    // Closing stops the cleaner wherever it is.
    drop((gone, db));
    let db = open(&fs);
    wait_for_cleaning(&db);
    db.checkpoint_now().unwrap();
    assert_eq!(
        db.check().unwrap().tree_keys,
        1,
        "only the catalog's next id"
    );
    assert!(db.keyspace_names().unwrap().is_empty());
}

#[test]
fn bad_names_and_foreign_handles_are_refused_and_change_nothing() {
    let fs = FaultFs::new();
    let db = open(&fs);
    for name in [&b""[..], &[b'n'; 256][..]] {
        assert!(matches!(
            db.keyspace(name),
            Err(Error::InvalidKeyspaceName { len_bytes }) if len_bytes == name.len()
        ));
    }
    assert!(db.keyspace([b'n'; 255]).is_ok());
    assert!(matches!(
        db.drop_keyspace("none"),
        Err(Error::KeyspaceNotFound(_))
    ));
    // Default page sizes, which take keys of `MAX_KEY_SIZE`.
    let other_fs = FaultFs::new();
    let other = Db::open_with_fs(DIR, crate::Options::default(), Arc::new(other_fs)).unwrap();
    let foreign = other.keyspace("foreign").unwrap();
    let mut batch = WriteBatch::new();
    batch.put("mine", "1").put_in(&foreign, "x", "y");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::ForeignKeyspace(_))
    ));
    assert_eq!(db.get("mine").unwrap(), None);
    assert!(matches!(
        db.snapshot().get_in(&foreign, "x"),
        Err(Error::ForeignKeyspace(_))
    ));
    let long_key = vec![1; crate::MAX_KEY_SIZE];
    foreign.put(&long_key, "max").unwrap();
    assert_eq!(foreign.get(&long_key).unwrap().unwrap(), "max");
    assert!(matches!(
        foreign.put(vec![1; crate::MAX_KEY_SIZE + 1], "x"),
        Err(Error::KeyTooLarge { .. })
    ));
}

#[test]
fn a_database_with_bare_keys_keeps_them_and_refuses_keyspaces() {
    let fs = FaultFs::new();
    crate::store::superblock::CREATE_BARE_KEYS.set(true);
    let db = Db::open_with_fs(DIR, checkpointing_test_options(), Arc::new(fs.clone()));
    crate::store::superblock::CREATE_BARE_KEYS.set(false);
    let db = db.unwrap();
    for i in 0..500u32 {
        db.put(i.to_be_bytes(), i.to_le_bytes()).unwrap();
    }
    db.checkpoint_now().unwrap();
    db.put("tail", "in the WAL").unwrap();
    assert!(matches!(db.keyspace("x"), Err(Error::KeyspacesUnsupported)));
    drop(db);
    let db = open(&fs);
    assert!(matches!(db.keyspace("x"), Err(Error::KeyspacesUnsupported)));
    assert_eq!(
        db.get(7u32.to_be_bytes()).unwrap().unwrap(),
        &7u32.to_le_bytes()[..]
    );
    assert_eq!(db.get("tail").unwrap().unwrap(), "in the WAL");
    let first = db.range::<&[u8], _>(..).next().unwrap().unwrap().0;
    assert_eq!(first, &0u32.to_be_bytes()[..], "keys come back bare");
    assert_eq!(db.check().unwrap().tree_keys, 500);
    assert!(db.keyspace_names().unwrap().is_empty());
}

/// A dropped keyspace's pages are freed even when it holds less than the
/// garbage the space policy tolerates: its tombstones are flushed down.
#[test]
fn a_small_dropped_keyspace_gives_its_pages_back() {
    let fs = FaultFs::new();
    let options = crate::Options {
        compression: crate::Compression::None,
        ..checkpointing_test_options()
    };
    let db = Db::open_with_fs(DIR, options, Arc::new(fs.clone())).unwrap();
    let keep = db.keyspace("keep").unwrap();
    let small = db.keyspace("small").unwrap();
    let mut value = [0u8; 100];
    for i in 0..20_000u32 {
        value[..4].copy_from_slice(&i.wrapping_mul(2654435761).to_le_bytes());
        keep.put(i.to_be_bytes(), value).unwrap();
        if i % 8 == 0 {
            small.put(i.to_be_bytes(), value).unwrap();
        }
    }
    db.checkpoint_now().unwrap();
    let small_bytes = 2_500 * 104;
    let before = db.stats();
    db.drop_keyspace("small").unwrap();
    wait_for_cleaning(&db);
    let after = db.stats();
    assert!(
        after.space_allocated_bytes + small_bytes * 3 / 4 <= before.space_allocated_bytes,
        "{} bytes allocated before the drop, {} after",
        before.space_allocated_bytes,
        after.space_allocated_bytes
    );
    assert!(
        after.tree_buffered_bytes < 2 * 1024,
        "the keyspace's tombstones went down: {} bytes still buffered",
        after.tree_buffered_bytes
    );
    assert_eq!(keep.range::<&[u8], _>(..).count(), 20_000);
    db.check().unwrap();
}

/// `check()` reads the catalog and refuses one whose ids clash.
#[test]
fn check_reports_a_catalog_whose_ids_clash() {
    let fs = FaultFs::new();
    let db = open(&fs);
    db.keyspace("a").unwrap();
    db.keyspace("b").unwrap();
    assert_eq!(db.check().unwrap().keyspaces, 2);
    // A crafted catalog entry naming a's id again, written as the
    // catalog writes (a batch of stored keys).
    let mut batch = WriteBatch::new();
    batch.push_stored(b"\x01nc", Some(&2u32.to_be_bytes()));
    db.inner.submit_batch(batch, false, None).unwrap();
    assert!(matches!(db.check(), Err(Error::Corruption { .. })));
}
