//! Model-based test: random operations against the engine and a `BTreeMap`.

mod common;

use std::ops::Bound;

use common::{Model, checkpointing_options, contents, open_fault, small_options};
use proptest::prelude::*;
use turtlekv::io::FaultFs;
use turtlekv::{Db, Options, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, Order),
    Prefix(Vec<u8>, bool),
    Snapshot,
    Reopen,
    Checkpoint,
}

/// How a range is consumed.
#[derive(Debug, Clone, Copy)]
enum Order {
    Forward,
    Reverse,
    /// Both ends of one iterator: bit `i % 8` of the pattern picks the
    /// front (set) or the back (clear) for the `i`-th item.
    Zigzag(u8),
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Forward),
        Just(Order::Reverse),
        any::<u8>().prop_map(Order::Zigzag),
    ]
}

/// Few distinct bytes, so keys collide, share prefixes and hit 0xff edges.
fn key() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', 0xff]), 1..4)
}

fn value() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(any::<u8>(), 0..24)
}

/// Keys of many lengths over a key space thousands wide, sharing long
/// prefixes, mixed with the short colliding ones: enough distinct data
/// to grow a tree of tiny pages several levels high.
fn wide_key() -> impl Strategy<Value = Vec<u8>> + Clone {
    let long = (
        prop::sample::select(vec![&b""[..], b"user:", b"user:profile:", b"\xff\xff"]),
        0u32..3000,
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(prefix, n, suffix)| {
            let mut k = prefix.to_vec();
            k.extend_from_slice(format!("{n:05}").as_bytes());
            k.extend_from_slice(&suffix);
            k
        });
    prop_oneof![1 => key(), 4 => long]
}

fn wide_value() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(any::<u8>(), 0..600)
}

fn op() -> impl Strategy<Value = Op> {
    op_with(key(), value(), 6)
}

/// Operations on keys and values drawn from `key` and `value`, batches of
/// fewer than `batch_max` entries.
fn op_with(
    key: impl Strategy<Value = Vec<u8>> + Clone + 'static,
    value: impl Strategy<Value = Vec<u8>> + Clone + 'static,
    batch_max: usize,
) -> impl Strategy<Value = Op> {
    let bound = prop_oneof![
        Just(Bound::Unbounded),
        key.clone().prop_map(Bound::Included),
        key.clone().prop_map(Bound::Excluded),
    ];
    prop_oneof![
        6 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => key.clone().prop_map(Op::Delete),
        2 => prop::collection::vec((key.clone(), prop::option::of(value)), 0..batch_max)
            .prop_map(Op::Batch),
        3 => key.prop_map(Op::Get),
        2 => (bound.clone(), bound, order()).prop_map(|(l, u, o)| Op::Range(l, u, o)),
        1 => (prop::collection::vec(prop::sample::select(vec![b'a', 0xff]), 0..3), any::<bool>())
            .prop_map(|(p, r)| Op::Prefix(p, r)),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Reopen),
        1 => Just(Op::Checkpoint),
    ]
}

type Pair = (Vec<u8>, Vec<u8>);

fn owned(kv: turtlekv::Result<(turtlekv::Bytes, turtlekv::Bytes)>) -> Pair {
    let (k, v) = kv.unwrap();
    (k.to_vec(), v.to_vec())
}

fn collect(it: turtlekv::Iter, rev: bool) -> Vec<Pair> {
    if rev {
        it.rev().map(owned).collect()
    } else {
        it.map(owned).collect()
    }
}

/// Consumes `it` in `order`; a zigzag's items come back in forward order
/// (the front's, then the back's reversed), so the ends must meet exactly.
fn collect_in(mut it: turtlekv::Iter, order: Order) -> Vec<Pair> {
    let pattern = match order {
        Order::Forward => return collect(it, false),
        Order::Reverse => return collect(it, true),
        Order::Zigzag(pattern) => pattern,
    };
    let (mut front, mut back) = (Vec::new(), Vec::new());
    for i in 0.. {
        let from_front = pattern & (1 << (i % 8)) != 0;
        let next = if from_front {
            it.next()
        } else {
            it.next_back()
        };
        match next {
            Some(kv) if from_front => front.push(owned(kv)),
            Some(kv) => back.push(owned(kv)),
            None => break,
        }
    }
    // Once one end finds nothing, the other must too: the ends have met.
    assert!(it.next().is_none() && it.next_back().is_none());
    back.reverse();
    front.extend(back);
    front
}

fn model_range(
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    rev: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let inside = |k: &Vec<u8>| {
        let above = match lo {
            Bound::Included(l) => k >= l,
            Bound::Excluded(l) => k > l,
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(h) => k <= h,
            Bound::Excluded(h) => k < h,
            Bound::Unbounded => true,
        };
        above && below
    };
    let mut out: Vec<_> = model
        .iter()
        .filter(|(k, _)| inside(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rev {
        out.reverse();
    }
    out
}

fn run(ops: Vec<Op>, options: Options) {
    let fs = FaultFs::new();
    let mut db: Db = open_fault(&fs, options.clone()).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(turtlekv::Snapshot, Model)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            Op::Delete(k) => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            Op::Batch(entries) => {
                let mut batch = WriteBatch::new();
                for (k, v) in &entries {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                db.write(
                    batch,
                    &WriteOptions {
                        sync: entries.len() % 2 == 0,
                    },
                )
                .unwrap();
                for (k, v) in entries {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            Op::Get(k) => {
                assert_eq!(
                    db.get(&k).unwrap().map(|v| v.to_vec()),
                    model.get(&k).cloned()
                );
            }
            Op::Range(lo, hi, order) => {
                let got = collect_in(db.range((lo.clone(), hi.clone())), order);
                let rev = matches!(order, Order::Reverse);
                assert_eq!(got, model_range(&model, &lo, &hi, rev));
            }
            Op::Prefix(p, rev) => {
                let got = collect(db.prefix(&p), rev);
                let want: Vec<_> = model_range(&model, &Bound::Unbounded, &Bound::Unbounded, rev)
                    .into_iter()
                    .filter(|(k, _)| k.starts_with(&p))
                    .collect();
                assert_eq!(got, want);
            }
            Op::Snapshot => snapshots.push((db.snapshot(), model.clone())),
            Op::Reopen => {
                snapshots.clear();
                drop(db);
                db = open_fault(&fs, options.clone()).unwrap();
                db.check().unwrap();
            }
            Op::Checkpoint => {
                db.checkpoint_now().unwrap();
                assert_eq!(db.stats().memtable_entries, 0);
            }
        }
        for (snap, frozen) in &snapshots {
            let got: Model = collect(snap.range::<&[u8], _>(..), false)
                .into_iter()
                .collect();
            assert_eq!(&got, frozen);
        }
    }
    assert_eq!(contents(&db), model);
    // Snapshots hold the database open, like any other handle.
    snapshots.clear();
    drop(db);
    let db = open_fault(&fs, options).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_btreemap(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, small_options());
    }

    /// The same with checkpoints every few writes into a tree of tiny pages.
    #[test]
    fn engine_with_checkpoints_matches_btreemap(ops in prop::collection::vec(op(), 1..200)) {
        run(ops, checkpointing_options());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Keys of 1 to 58 bytes over a wide key space and values up to 600
    /// bytes: the data above fits one leaf, so snapshots, reopens and
    /// ranges there never meet a tree of several levels. These
    /// runs end with 8-24 leaves under a tree of height 2 (23 cases of 24
    /// when measured), in about 5 s.
    #[test]
    fn engine_with_a_tall_tree_matches_btreemap(
        ops in prop::collection::vec(op_with(wide_key(), wide_value(), 60), 200..600)
    ) {
        // 512-byte nodes hold a few pivots of these keys (at most 58
        // bytes; such nodes take up to 91), so a few leaves need a second
        // level of nodes.
        let mut options = checkpointing_options();
        options.node_size_bytes = 512;
        run(ops, options);
    }
}
