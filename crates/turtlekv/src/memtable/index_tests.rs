//! Tests of the index over the skiplist's tall nodes: it holds exactly the
//! nodes of its level in any insert order, with keys that tie on their
//! 8-byte prefixes, and readers beside the writer find every key.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::{Direction, MemTable, SkipListMemTable};

const KEYS: u64 = 6_000;

/// A scrambled 8-byte key: no two share a prefix.
fn spread(i: u64) -> Bytes {
    Bytes::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes().to_vec())
}

/// Keys that all share their first 8 bytes: every index comparison ties on
/// the prefix and reads the node.
fn tied(i: u64) -> Bytes {
    Bytes::from(format!(
        "user0000{:012}",
        i.wrapping_mul(7_919) % 1_000_000_007
    ))
}

/// Keys of 1-3 bytes: zero-padded prefixes tie for "a" and "a\0".
fn short(i: u64) -> Bytes {
    let bytes = i.to_be_bytes();
    let len = 1 + (i % 3) as usize;
    Bytes::from(bytes[8 - len..].to_vec())
}

fn check_every_key(t: &SkipListMemTable, keys: &[Bytes]) {
    assert_eq!(t.check_structure(), Ok(()));
    for (i, k) in keys.iter().enumerate() {
        let seq = i as u64 + 1;
        assert_eq!(
            t.get(k, u64::MAX),
            Some(Some(Bytes::from(seq.to_be_bytes().to_vec())))
        );
        assert_eq!(t.get(k, seq - 1), None, "no version below its first");
    }
    let mut out = Vec::new();
    let all = Bound::Unbounded;
    t.scan(all, all, u64::MAX, Direction::Forward, usize::MAX, &mut out);
    let mut sorted = keys.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        out.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        sorted
    );
}

#[test]
fn the_index_holds_every_tall_node_in_any_insert_order() {
    for make in [spread, tied, short] {
        let ascending: Vec<u64> = (0..KEYS).collect();
        let descending: Vec<u64> = (0..KEYS).rev().collect();
        let scrambled: Vec<u64> = (0..KEYS)
            .map(|i| i.wrapping_mul(2_654_435_761) % KEYS)
            .collect();
        for order in [ascending, descending, scrambled] {
            let t = SkipListMemTable::with_capacity(4 << 20);
            let mut keys: Vec<Bytes> = order.iter().map(|&i| make(i)).collect();
            // Short keys repeat: keep each key's first write only.
            let mut seen = std::collections::HashSet::new();
            keys.retain(|k| seen.insert(k.clone()));
            for (i, k) in keys.iter().enumerate() {
                let seq = i as u64 + 1;
                t.insert(
                    k.clone(),
                    seq,
                    Some(Bytes::from(seq.to_be_bytes().to_vec())),
                );
            }
            check_every_key(&t, &keys);
        }
    }
}

/// Prepared inserts of keys that tie on their prefixes, beside readers
/// that look up every key written so far.
#[test]
fn readers_beside_the_writer_find_every_key_through_the_index() {
    let t = SkipListMemTable::with_capacity(4 << 20);
    let written = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..KEYS {
                let k = tied(i);
                let hint = t.prepare_insert(&k);
                t.insert_prepared(k.clone(), i + 1, Some(k), &hint);
                written.store(i + 1, Ordering::Release);
            }
        });
        for reader in 0..2 {
            let (t, written) = (&t, &written);
            s.spawn(move || {
                let mut i = reader;
                loop {
                    let n = written.load(Ordering::Acquire);
                    if n == 0 {
                        std::hint::spin_loop();
                        continue;
                    }
                    let k = tied(i % n);
                    assert_eq!(t.get(&k, u64::MAX), Some(Some(k)));
                    if n == KEYS && i > 4 * KEYS {
                        break;
                    }
                    i += 7;
                }
            });
        }
    });
    assert_eq!(t.check_structure(), Ok(()));
}

/// A few keys with thousands of versions each (the index holds one per
/// key): gets at old sequence numbers walk past many newer versions and
/// fall back to a search from the top, and every answer matches a model.
#[test]
fn gets_at_every_version_of_hot_keys_match_a_model() {
    const VERSIONS: u64 = 3_000;
    let t = SkipListMemTable::with_capacity(4 << 20);
    let keys = [tied(1), tied(2), spread(3)];
    let mut seq = 0;
    for v in 0..VERSIONS {
        for (i, k) in keys.iter().enumerate() {
            seq += 1;
            let value = Bytes::from(format!("{i}-{v}"));
            if v % 2 == 0 {
                let hint = t.prepare_insert(k);
                t.insert_prepared(k.clone(), seq, Some(value), &hint);
            } else {
                t.insert(k.clone(), seq, Some(value));
            }
        }
    }
    assert_eq!(t.check_structure(), Ok(()));
    for v in (0..VERSIONS).step_by(37).chain([VERSIONS - 1]) {
        for (i, k) in keys.iter().enumerate() {
            // Version `v` of key `i` was written at this sequence number.
            let written = v * keys.len() as u64 + i as u64 + 1;
            let want = Bytes::from(format!("{i}-{v}"));
            assert_eq!(t.get(k, written), Some(Some(want.clone())));
            assert_eq!(t.get(k, written + 1), Some(Some(want)));
        }
    }
    for k in &keys {
        assert_eq!(t.get(k, 0), None);
    }
}
