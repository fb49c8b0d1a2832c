//! Everyday reads beside `get` and `range`: `iter`, `contains_key`,
//! `multi_get`, `first_key_value`, `last_key_value` and `Iter::seek`, on
//! the database, a snapshot and a keyspace, against a model.

mod common;

use common::{Model, Rng, checkpointing_options};
use turtlekv::{Bytes, Db, Error, MAX_KEY_SIZE, Options, WriteBatch, WriteOptions};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A database written through MemTables and several checkpoints, so that
/// reads meet every source: the active MemTable, frozen ones and the tree.
fn populated(seed: u64) -> (tempfile::TempDir, Db, Model) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), checkpointing_options()).unwrap();
    let mut model = Model::new();
    let mut rng = Rng(seed);
    for round in 0..4 {
        for _ in 0..400 {
            let k = key(rng.below(600));
            if rng.below(5) == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("value-{round}-{}", rng.next()).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if round < 3 {
            db.checkpoint_now().unwrap();
        }
    }
    (dir, db, model)
}

fn pair(k: &[u8], v: &[u8]) -> (Bytes, Bytes) {
    (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v))
}

#[test]
fn multi_get_answers_as_get_does_in_order() {
    let (_dir, db, model) = populated(7);
    let mut rng = Rng(99);
    for len in [0usize, 1, 2, 32, 200] {
        let keys: Vec<Vec<u8>> = (0..len).map(|_| key(rng.below(700))).collect();
        let values = db.multi_get(&keys).unwrap();
        assert_eq!(values.len(), keys.len());
        for (k, v) in keys.iter().zip(&values) {
            assert_eq!(v.as_deref(), model.get(k).map(|v| &v[..]), "{k:?}");
            assert_eq!(db.get(k).unwrap(), *v);
        }
    }
    // The same key twice gets the same answer twice.
    let k = model.keys().next().unwrap().clone();
    let twice = db.multi_get([&k, &k]).unwrap();
    assert_eq!(twice[0], twice[1]);
    assert!(twice[0].is_some());
}

#[test]
fn multi_get_reads_one_point_in_time() {
    let (_dir, db, model) = populated(8);
    let snapshot = db.snapshot();
    let keys: Vec<Vec<u8>> = (0..700).map(key).collect();
    for k in &keys {
        db.put(k, b"later").unwrap();
    }
    let seen = snapshot.multi_get(&keys).unwrap();
    for (k, v) in keys.iter().zip(&seen) {
        assert_eq!(v.as_deref(), model.get(k).map(|v| &v[..]));
    }
    assert!(
        db.multi_get(&keys)
            .unwrap()
            .iter()
            .all(|v| v.as_deref() == Some(&b"later"[..]))
    );
}

#[test]
fn multi_get_out_of_cache_reads_what_the_tree_holds() {
    let dir = tempfile::tempdir().unwrap();
    // Small leaves and a small cache: most lookups read a leaf chunk from
    // disk, so the prefetch of many chunks at once is exercised.
    let options = Options::new()
        .leaf_size_bytes(16 * 1024)
        .node_size_bytes(4096)
        .checkpoint_distance_bytes(256 * 1024)
        .cache_capacity_bytes(1024 * 1024)
        .record_cache_capacity_bytes(0);
    let db = Db::open(dir.path(), options).unwrap();
    let value = |i: u64| format!("{i:0>100}").into_bytes();
    for i in 0..20_000 {
        db.put(key(i), value(i)).unwrap();
    }
    db.checkpoint_now().unwrap();
    let mut rng = Rng(3);
    for _ in 0..20 {
        let ids: Vec<u64> = (0..32).map(|_| rng.below(25_000)).collect();
        let keys: Vec<Vec<u8>> = ids.iter().map(|&i| key(i)).collect();
        let values = db.multi_get(&keys).unwrap();
        for (i, v) in ids.iter().zip(values) {
            let expected = (*i < 20_000).then(|| value(*i));
            assert_eq!(v.as_deref(), expected.as_deref(), "key {i}");
        }
    }
    assert!(db.stats().get_disk_reads > 0, "the lookups read from disk");
}

#[test]
fn multi_get_refuses_a_bad_key_whole() {
    let (_dir, db, _) = populated(9);
    let long = vec![b'x'; MAX_KEY_SIZE + 1];
    let keys = vec![key(1), long];
    assert!(matches!(
        db.multi_get(&keys),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(db.multi_get([&b""[..]]), Err(Error::EmptyKey)));
}

#[test]
fn iter_contains_key_and_the_ends_follow_the_model() {
    let (_dir, db, model) = populated(10);
    let all: Vec<(Bytes, Bytes)> = db.iter().map(Result::unwrap).collect();
    let expected: Vec<(Bytes, Bytes)> = model.iter().map(|(k, v)| pair(k, v)).collect();
    assert_eq!(all, expected);
    let reversed: Vec<(Bytes, Bytes)> = db.iter().rev().map(Result::unwrap).collect();
    assert!(reversed.iter().eq(expected.iter().rev()));
    let first = model.iter().next().map(|(k, v)| pair(k, v));
    let last = model.iter().next_back().map(|(k, v)| pair(k, v));
    assert_eq!(db.first_key_value().unwrap(), first);
    assert_eq!(db.last_key_value().unwrap(), last);
    for i in 0..700 {
        let k = key(i);
        assert_eq!(db.contains_key(&k).unwrap(), model.contains_key(&k));
    }
    // Deleting the ends moves them.
    let snapshot = db.snapshot();
    let (first_key, _) = db.first_key_value().unwrap().unwrap();
    let (last_key, _) = db.last_key_value().unwrap().unwrap();
    db.delete(&first_key).unwrap();
    db.delete(&last_key).unwrap();
    assert_ne!(db.first_key_value().unwrap().unwrap().0, first_key);
    assert_ne!(db.last_key_value().unwrap().unwrap().0, last_key);
    assert!(!db.contains_key(&first_key).unwrap());
    // The snapshot still has them.
    assert_eq!(snapshot.first_key_value().unwrap().unwrap().0, first_key);
    assert_eq!(snapshot.last_key_value().unwrap().unwrap().0, last_key);
    assert!(snapshot.contains_key(&first_key).unwrap());
    assert_eq!(snapshot.iter().count(), model.len());
}

#[test]
fn an_empty_database_has_no_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new()).unwrap();
    assert_eq!(db.first_key_value().unwrap(), None);
    assert_eq!(db.last_key_value().unwrap(), None);
    assert_eq!(db.iter().count(), 0);
    assert_eq!(db.multi_get([b"a", b"b"]).unwrap(), vec![None, None]);
    assert!(!db.contains_key(b"a").unwrap());
}

#[test]
fn keyspace_reads_see_only_their_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), checkpointing_options()).unwrap();
    let left = db.keyspace("left").unwrap();
    let right = db.keyspace("right").unwrap();
    for i in 0..300 {
        left.put(key(i), b"l").unwrap();
        if i % 2 == 0 {
            right.put(key(i), b"r").unwrap();
        }
        if i % 3 == 0 {
            db.put(key(i), b"d").unwrap();
        }
    }
    db.checkpoint_now().unwrap();
    assert_eq!(left.iter().count(), 300);
    assert_eq!(right.iter().count(), 150);
    assert_eq!(db.iter().count(), 100);
    assert_eq!(left.first_key_value().unwrap(), Some(pair(&key(0), b"l")));
    assert_eq!(right.last_key_value().unwrap(), Some(pair(&key(298), b"r")));
    assert_eq!(db.last_key_value().unwrap(), Some(pair(&key(297), b"d")));
    assert!(!right.contains_key(key(1)).unwrap());
    assert!(left.contains_key(key(1)).unwrap());
    let keys: Vec<Vec<u8>> = (0..4).map(key).collect();
    let got = right.multi_get(&keys).unwrap();
    let expected: Vec<Option<Bytes>> = [Some("r"), None, Some("r"), None]
        .iter()
        .map(|v| v.map(|v| Bytes::copy_from_slice(v.as_bytes())))
        .collect();
    assert_eq!(got, expected);
    let empty = db.keyspace("empty").unwrap();
    assert_eq!(empty.first_key_value().unwrap(), None);
    assert_eq!(empty.last_key_value().unwrap(), None);
    db.drop_keyspace("left").unwrap();
    assert!(matches!(
        left.multi_get(&keys),
        Err(Error::KeyspaceDropped(_))
    ));
    assert!(matches!(
        left.first_key_value(),
        Err(Error::KeyspaceDropped(_))
    ));
}

#[test]
fn seek_moves_the_forward_end_within_the_range() {
    let (_dir, db, model) = populated(11);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let from_model = |lo: &[u8]| -> Vec<Vec<u8>> {
        model.range(lo.to_vec()..).map(|(k, _)| k.clone()).collect()
    };
    let collect = |iter: &mut turtlekv::Iter| -> Vec<Vec<u8>> {
        iter.map(|kv| kv.unwrap().0.to_vec()).collect()
    };
    let mut iter = db.iter();
    // Forward, after part of a scan, and backwards again.
    let _ = iter.by_ref().take(10).count();
    iter.seek(keys[200]);
    assert_eq!(collect(&mut iter), from_model(keys[200]));
    iter.seek(keys[5]);
    assert_eq!(collect(&mut iter), from_model(keys[5]));
    // A key between stored keys, one past the end, one before the start.
    iter.seek(b"key00100x");
    assert_eq!(collect(&mut iter), from_model(b"key00100x"));
    iter.seek(b"zzz");
    assert_eq!(iter.next().map(|kv| kv.unwrap()), None);
    iter.seek(b"");
    assert_eq!(collect(&mut iter), from_model(b""));

    // Within a range: a seek below its start lands on the start, and the
    // range's end still holds.
    let (lo, hi) = (keys[50].clone(), keys[60].clone());
    let mut ranged = db.range(lo.clone()..hi.clone());
    ranged.seek(b"a");
    let expected: Vec<Vec<u8>> = model.range(lo..hi).map(|(k, _)| k.clone()).collect();
    assert_eq!(collect(&mut ranged), expected);
    ranged.seek(keys[55]);
    assert_eq!(collect(&mut ranged), expected[5..].to_vec());
}

#[test]
fn seek_back_moves_the_reverse_end_and_the_ends_still_meet() {
    let (_dir, db, model) = populated(12);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut iter = db.iter();
    iter.seek_back(keys[100]);
    let back: Vec<Vec<u8>> = iter
        .by_ref()
        .rev()
        .take(3)
        .map(|kv| kv.unwrap().0.to_vec())
        .collect();
    let expected: Vec<Vec<u8>> = keys[98..=100].iter().rev().map(|k| k.to_vec()).collect();
    assert_eq!(back, expected);
    // The forward end stops where the reverse end has been.
    let forward: Vec<Vec<u8>> = iter.by_ref().map(|kv| kv.unwrap().0.to_vec()).collect();
    let expected: Vec<Vec<u8>> = keys[..98].iter().map(|k| k.to_vec()).collect();
    assert_eq!(forward, expected);
}

#[test]
fn seek_in_a_keyspace_stays_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..50 {
        batch.put(key(i), b"default");
        batch.put_in(&ks, key(i), b"ks");
    }
    db.write(batch, &WriteOptions::new().sync(true)).unwrap();
    let mut iter = ks.iter();
    iter.seek(key(45));
    let rest: Vec<(Bytes, Bytes)> = iter.map(Result::unwrap).collect();
    let expected: Vec<(Bytes, Bytes)> = (45..50).map(|i| pair(&key(i), b"ks")).collect();
    assert_eq!(rest, expected);
    let mut iter = ks.iter();
    iter.seek_back(key(2));
    let rest: Vec<(Bytes, Bytes)> = iter.rev().map(Result::unwrap).collect();
    let expected: Vec<(Bytes, Bytes)> = (0..3).rev().map(|i| pair(&key(i), b"ks")).collect();
    assert_eq!(rest, expected);
}

#[test]
fn options_build_by_chained_setters() {
    let options = Options::new()
        .cache_capacity_bytes(64 << 20)
        .checkpoint_distance_bytes(8 << 20)
        .compression(turtlekv::Compression::None)
        .create_if_missing(false);
    assert_eq!(options.cache_capacity_bytes, 64 << 20);
    assert_eq!(options.checkpoint_distance_bytes, 8 << 20);
    assert_eq!(options.compression, turtlekv::Compression::None);
    assert!(!options.create_if_missing);
    let rest = Options::default();
    assert_eq!(options.leaf_size_bytes, rest.leaf_size_bytes);
    assert!(WriteOptions::new().sync(true).sync);
    assert_eq!(WriteOptions::new(), WriteOptions::default());
}

/// Within `tolerance` (a fraction) of `exact`.
fn near(estimate: u64, exact: u64, tolerance: f64) -> bool {
    (estimate as f64 - exact as f64).abs() <= exact as f64 * tolerance
}

#[test]
fn approximate_len_follows_each_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::new()
        .leaf_size_bytes(64 * 1024)
        .checkpoint_distance_bytes(1 << 20);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.approximate_len().unwrap(), 0);
    let small = db.keyspace("small").unwrap();
    let large = db.keyspace("large").unwrap();
    let value = [7u8; 100];
    for i in 0..60_000 {
        large.put(key(i), value).unwrap();
        if i % 10 == 0 {
            db.put(key(i), value).unwrap();
        }
        if i % 1000 == 0 {
            small.put(key(i), value).unwrap();
        }
    }
    // In the MemTables, then in the tree.
    for round in 0..2 {
        let (d, s, l) = (
            db.approximate_len().unwrap(),
            small.approximate_len().unwrap(),
            large.approximate_len().unwrap(),
        );
        assert!(near(d, 6_000, 0.2), "round {round}: default {d}");
        assert!(near(s, 60, 0.2), "round {round}: small {s}");
        assert!(near(l, 60_000, 0.2), "round {round}: large {l}");
        db.checkpoint_now().unwrap();
    }
    let snapshot = db.snapshot();
    for i in 0..30_000 {
        large.delete(key(i)).unwrap();
    }
    db.checkpoint_now().unwrap();
    assert_eq!(
        snapshot.approximate_len().unwrap(),
        db.approximate_len().unwrap()
    );
    // Deletes count until they are merged: the estimate stays between the
    // keys left and the records stored.
    let l = large.approximate_len().unwrap();
    assert!((24_000..=96_000).contains(&l), "after deletes: {l}");
    db.drop_keyspace("small").unwrap();
    assert!(matches!(
        small.approximate_len(),
        Err(Error::KeyspaceDropped(_))
    ));
}
