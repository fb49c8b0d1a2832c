//! Model-based test: random operations against the engine and a `BTreeMap`
//! (with keyspaces, a `BTreeMap` per keyspace).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use common::{Model, checkpointing_options, contents, open_fault, small_options};
use proptest::prelude::*;
use turtlekv::io::FaultFs;
use turtlekv::{Db, Error, Keyspace, Options, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// `Db::delete_range(start, end)`; an empty or inverted range must be
    /// refused and change nothing.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// A batch of entries, a range deletion, then more entries: the range
    /// deletes what the batch put before it, not what it puts after.
    RangeBatch(
        Vec<(Vec<u8>, Option<Vec<u8>>)>,
        Vec<u8>,
        Vec<u8>,
        Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ),
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
        2 => prop::collection::vec((key.clone(), prop::option::of(value.clone())), 0..batch_max)
            .prop_map(Op::Batch),
        2 => (key.clone(), key.clone()).prop_map(|(s, e)| Op::DeleteRange(s, e)),
        1 => (
            prop::collection::vec((key.clone(), prop::option::of(value.clone())), 0..3),
            key.clone(),
            key.clone(),
            prop::collection::vec((key.clone(), prop::option::of(value)), 0..3),
        )
            .prop_map(|(before, s, e, after)| Op::RangeBatch(before, s, e, after)),
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

/// Removes the keys `start..end` from `model`.
fn model_delete_range(model: &mut Model, start: &[u8], end: &[u8]) {
    model.retain(|k, _| !(start <= k.as_slice() && k.as_slice() < end));
}

/// A non-empty range from two keys: ordered, and widened when equal.
fn nonempty(a: Vec<u8>, b: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    match a.cmp(&b) {
        std::cmp::Ordering::Less => (a, b),
        std::cmp::Ordering::Greater => (b, a),
        std::cmp::Ordering::Equal => {
            let mut end = a.clone();
            end.push(0);
            (a, end)
        }
    }
}

fn add_entries(batch: &mut WriteBatch, entries: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in entries {
        match v {
            Some(v) => batch.put(k, v),
            None => batch.delete(k),
        };
    }
}

fn model_entries(model: &mut Model, entries: Vec<(Vec<u8>, Option<Vec<u8>>)>) {
    for (k, v) in entries {
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
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
                db.write(batch, &WriteOptions::new().sync(entries.len() % 2 == 0))
                    .unwrap();
                for (k, v) in entries {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            Op::DeleteRange(start, end) => {
                let result = db.delete_range(&start, &end);
                if start < end {
                    result.unwrap();
                    model_delete_range(&mut model, &start, &end);
                } else {
                    assert!(
                        matches!(result, Err(Error::InvalidRange { .. })),
                        "{result:?}"
                    );
                }
            }
            Op::RangeBatch(before, start, end, after) => {
                let (start, end) = nonempty(start, end);
                let mut batch = WriteBatch::new();
                add_entries(&mut batch, &before);
                batch.delete_range(&start, &end);
                add_entries(&mut batch, &after);
                let sync = after.len() % 2 == 0;
                db.write(batch, &WriteOptions::new().sync(sync)).unwrap();
                model_entries(&mut model, before);
                model_delete_range(&mut model, &start, &end);
                model_entries(&mut model, after);
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

// Keyspaces: the model is the default keyspace's map and a map per live
// named keyspace.

/// Names of the named keyspaces the operations use.
const NAMES: [&str; 3] = ["a", "b", "c"];

/// The keyspace an operation is on: `None` for the default one, else an
/// index into [`NAMES`].
type Space = Option<usize>;

type SpaceEntry = (Space, Vec<u8>, Option<Vec<u8>>);

#[derive(Debug, Clone)]
enum KsOp {
    /// `Db::keyspace`: opens the keyspace, or creates it.
    Open(usize),
    Drop(usize),
    Put(Space, Vec<u8>, Vec<u8>, bool),
    Delete(Space, Vec<u8>),
    /// A `WriteBatch` across keyspaces, synced or not.
    Batch(Vec<SpaceEntry>, bool),
    /// `delete_range` in one keyspace (a range of user keys, which must
    /// leave every other keyspace alone), synced or not.
    DeleteRange(Space, Vec<u8>, Vec<u8>, bool),
    Get(Space, Vec<u8>),
    Range(Space, Bound<Vec<u8>>, Bound<Vec<u8>>, Order),
    Prefix(Space, Vec<u8>, bool),
    Snapshot,
    /// A transaction reads `reads`, buffers `writes`, scans `scan` as it
    /// sees it, then commits or is dropped.
    Txn {
        reads: Vec<(Space, Vec<u8>)>,
        writes: Vec<SpaceEntry>,
        scan: Space,
        commit: bool,
    },
    /// A transaction reads a key, another write changes it, and the
    /// transaction's write of it must fail to commit.
    TxnConflict(Space, Vec<u8>, Vec<u8>),
    /// `compare_and_swap` in the default keyspace, with the right expected
    /// value or a wrong one.
    CompareAndSwap(Vec<u8>, bool, Option<Vec<u8>>),
    /// `update_and_fetch` in the default keyspace, appending a byte.
    UpdateAndFetch(Vec<u8>),
    Checkpoint,
    Reopen,
}

fn space() -> impl Strategy<Value = Space> + Clone {
    prop_oneof![1 => Just(None), 3 => (0..NAMES.len()).prop_map(Some)]
}

fn ks_op() -> impl Strategy<Value = KsOp> {
    let bound = prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ];
    let entry = (space(), key(), prop::option::of(value()));
    let name = 0..NAMES.len();
    prop_oneof![
        2 => name.clone().prop_map(KsOp::Open),
        1 => name.prop_map(KsOp::Drop),
        6 => (space(), key(), value(), any::<bool>()).prop_map(|(s, k, v, y)| KsOp::Put(s, k, v, y)),
        2 => (space(), key()).prop_map(|(s, k)| KsOp::Delete(s, k)),
        3 => (prop::collection::vec(entry.clone(), 0..6), any::<bool>())
            .prop_map(|(e, y)| KsOp::Batch(e, y)),
        2 => (space(), key(), key(), any::<bool>())
            .prop_map(|(s, a, b, y)| KsOp::DeleteRange(s, a, b, y)),
        3 => (space(), key()).prop_map(|(s, k)| KsOp::Get(s, k)),
        2 => (space(), bound.clone(), bound, order()).prop_map(|(s, l, u, o)| KsOp::Range(s, l, u, o)),
        1 => (space(), prop::collection::vec(prop::sample::select(vec![b'a', 0xff]), 0..3), any::<bool>())
            .prop_map(|(s, p, r)| KsOp::Prefix(s, p, r)),
        1 => Just(KsOp::Snapshot),
        2 => (
            prop::collection::vec((space(), key()), 0..3),
            prop::collection::vec(entry, 0..4),
            space(),
            prop::bool::weighted(0.8),
        )
            .prop_map(|(reads, writes, scan, commit)| KsOp::Txn { reads, writes, scan, commit }),
        1 => (space(), key(), value()).prop_map(|(s, k, v)| KsOp::TxnConflict(s, k, v)),
        1 => (key(), any::<bool>(), prop::option::of(value()))
            .prop_map(|(k, right, new)| KsOp::CompareAndSwap(k, right, new)),
        1 => key().prop_map(KsOp::UpdateAndFetch),
        1 => Just(KsOp::Checkpoint),
        1 => Just(KsOp::Reopen),
    ]
}

/// The model: the default keyspace and each live named keyspace, which
/// carries an incarnation number (a name dropped and created again is a
/// new keyspace).
#[derive(Debug, Clone, Default)]
struct KsModel {
    default: Model,
    named: BTreeMap<usize, (u64, Model)>,
    incarnations: u64,
    /// A keyspace was created (the catalog holds its next id).
    created_any: bool,
}

impl KsModel {
    fn space_mut(&mut self, space: Space) -> &mut Model {
        match space {
            None => &mut self.default,
            Some(i) => &mut self.named.get_mut(&i).expect("a live keyspace").1,
        }
    }

    fn space(&self, space: Space) -> &Model {
        match space {
            None => &self.default,
            Some(i) => &self.named[&i].1,
        }
    }

    fn apply(&mut self, space: Space, k: &[u8], v: Option<&[u8]>) {
        let m = self.space_mut(space);
        match v {
            Some(v) => m.insert(k.to_vec(), v.to_vec()),
            None => m.remove(k),
        };
    }

    fn names(&self) -> Vec<Vec<u8>> {
        let mut names: Vec<_> = self
            .named
            .keys()
            .map(|&i| NAMES[i].as_bytes().to_vec())
            .collect();
        names.sort();
        names
    }

    /// Every keyspace's contents by name, the default one's name empty.
    fn all(&self) -> BTreeMap<Vec<u8>, Model> {
        let mut all = BTreeMap::from([(Vec::new(), self.default.clone())]);
        for (&i, (_, m)) in &self.named {
            all.insert(NAMES[i].as_bytes().to_vec(), m.clone());
        }
        all
    }

    /// Keys in the tree after every drop is cleaned and a checkpoint:
    /// the live keys, a catalog name per named keyspace, and the
    /// catalog's next id once any keyspace was created.
    fn tree_keys(&self) -> u64 {
        let live = self.default.len() + self.named.values().map(|(_, m)| m.len()).sum::<usize>();
        (live + self.named.len() + usize::from(self.created_any)) as u64
    }
}

/// How an operation's keyspace resolves against the open handles.
enum Target<'a> {
    Default,
    Live(&'a Keyspace),
    /// A handle of a keyspace dropped since it was opened.
    Dropped(&'a Keyspace),
    /// Never opened since the database was: the operation is skipped.
    Unopened,
}

/// Handles by name index, with the incarnation each was opened on (a
/// dropped keyspace's handle stays until its name is opened again, or
/// the database reopens).
type Handles = HashMap<usize, (u64, Keyspace)>;

fn target<'a>(handles: &'a Handles, model: &KsModel, space: Space) -> Target<'a> {
    let Some(i) = space else {
        return Target::Default;
    };
    match handles.get(&i) {
        Some((inc, h)) if model.named.get(&i).is_some_and(|(live, _)| live == inc) => {
            Target::Live(h)
        }
        Some((_, h)) => Target::Dropped(h),
        None => Target::Unopened,
    }
}

fn dropped<T: std::fmt::Debug>(result: turtlekv::Result<T>) {
    assert!(
        matches!(result, Err(Error::KeyspaceDropped(_))),
        "{result:?}"
    );
}

/// Every live keyspace's contents by name, the default one's name empty.
fn db_all(db: &Db, handles: &Handles, model: &KsModel) -> BTreeMap<Vec<u8>, Model> {
    let mut all = BTreeMap::from([(Vec::new(), contents(db))]);
    for name in db.keyspace_names().unwrap() {
        let i = NAMES
            .iter()
            .position(|n| n.as_bytes() == name)
            .expect("a known name");
        let Target::Live(h) = target(handles, model, Some(i)) else {
            panic!("{name:?} is live in the database, not in the model");
        };
        all.insert(
            name,
            collect(h.range::<&[u8], _>(..), false)
                .into_iter()
                .collect(),
        );
    }
    all
}

/// A snapshot, the default keyspace's contents and each named keyspace's
/// by incarnation at the time it was taken.
struct FrozenKs {
    snapshot: turtlekv::Snapshot,
    default: Model,
    named: HashMap<u64, Model>,
}

/// Reads each snapshot through the current handles: a keyspace as it was
/// (empty if created since), a dropped one refused.
fn check_snapshots(snapshots: &[FrozenKs], handles: &Handles, model: &KsModel) {
    for frozen in snapshots {
        let snap = &frozen.snapshot;
        let got: Model = collect(snap.range::<&[u8], _>(..), false)
            .into_iter()
            .collect();
        assert_eq!(got, frozen.default);
        for (&i, (inc, h)) in handles {
            match target(handles, model, Some(i)) {
                Target::Live(_) => {
                    let got: Model = collect(snap.range_in::<&[u8], _>(h, ..), false)
                        .into_iter()
                        .collect();
                    let empty = Model::new();
                    let want = frozen.named.get(inc).unwrap_or(&empty);
                    assert_eq!(&got, want, "snapshot of {}", NAMES[i]);
                }
                _ => dropped(snap.get_in(h, b"a")),
            }
        }
    }
}

fn wait_for_cleaning(db: &Db) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while db.stats().keyspaces_dropping > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the cleaner did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn reopen_handles(db: &Db, model: &KsModel) -> Handles {
    assert_eq!(db.keyspace_names().unwrap(), model.names());
    model
        .named
        .iter()
        .map(|(&i, (inc, _))| (i, (*inc, db.keyspace(NAMES[i]).unwrap())))
        .collect()
}

/// Runs a transaction: its reads see the model, its scan the model with
/// its own writes; a commit applies them, unless it conflicts, which it
/// may only after a checkpoint committed since it started.
fn run_txn(
    db: &Db,
    handles: &Handles,
    model: &mut KsModel,
    reads: &[(Space, Vec<u8>)],
    writes: &[SpaceEntry],
    scan: Space,
    commit: bool,
) {
    let mut txn = db.transaction();
    for (s, k) in reads {
        match target(handles, model, *s) {
            Target::Default => {
                assert_eq!(
                    txn.get(k).unwrap().map(|v| v.to_vec()),
                    model.default.get(k).cloned()
                );
            }
            Target::Live(h) => assert_eq!(
                txn.get_in(h, k).unwrap().map(|v| v.to_vec()),
                model.space(*s).get(k).cloned()
            ),
            Target::Dropped(h) => dropped(txn.get_in(h, k)),
            Target::Unopened => {}
        }
    }
    let mut overlay = model.clone();
    for (s, k, v) in writes {
        match (target(handles, model, *s), v) {
            (Target::Default, Some(v)) => txn.put(k, v),
            (Target::Default, None) => txn.delete(k),
            (Target::Live(h), Some(v)) => txn.put_in(h, k, v),
            (Target::Live(h), None) => txn.delete_in(h, k),
            (Target::Dropped(_) | Target::Unopened, _) => continue,
        }
        overlay.apply(*s, k, v.as_deref());
    }
    // The transaction reads its own writes.
    let seen: Option<Vec<Pair>> = match target(handles, model, scan) {
        Target::Default => Some(txn.range::<&[u8], _>(..).map(owned).collect()),
        Target::Live(h) => Some(txn.range_in::<&[u8], _>(h, ..).map(owned).collect()),
        Target::Dropped(_) | Target::Unopened => None,
    };
    if let Some(seen) = seen {
        let want: Vec<Pair> = overlay
            .space(scan)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(seen, want, "the transaction's scan");
    }
    if !commit {
        drop(txn);
        return;
    }
    let start = txn.sequence();
    match txn.commit(&WriteOptions::default()) {
        Ok(()) => *model = overlay,
        Err(Error::Conflict(reason)) => assert!(
            db.stats().checkpoint_covered_sequence > start,
            "conflict without a write or a checkpoint since the start: {reason}"
        ),
        Err(e) => panic!("commit: {e}"),
    }
}

fn run_keyspaces(ops: Vec<KsOp>, options: Options) {
    let fs = FaultFs::new();
    let mut db: Db = open_fault(&fs, options.clone()).unwrap();
    let mut model = KsModel::default();
    let mut handles = Handles::new();
    let mut snapshots: Vec<FrozenKs> = Vec::new();
    for op in ops {
        match op {
            KsOp::Open(i) => {
                let h = db.keyspace(NAMES[i]).unwrap();
                let inc = match model.named.get(&i) {
                    Some((inc, _)) => *inc,
                    None => {
                        model.incarnations += 1;
                        model.created_any = true;
                        model.named.insert(i, (model.incarnations, Model::new()));
                        model.incarnations
                    }
                };
                handles.insert(i, (inc, h));
            }
            KsOp::Drop(i) => {
                let result = db.drop_keyspace(NAMES[i]);
                if model.named.remove(&i).is_some() {
                    result.unwrap();
                } else {
                    assert!(
                        matches!(result, Err(Error::KeyspaceNotFound(_))),
                        "{result:?}"
                    );
                }
            }
            KsOp::Put(s, k, v, sync) => {
                let options = WriteOptions::new().sync(sync);
                match target(&handles, &model, s) {
                    Target::Default => db.put_opt(&k, &v, &options).unwrap(),
                    Target::Live(h) => h.put_opt(&k, &v, &options).unwrap(),
                    Target::Dropped(h) => {
                        dropped(h.put_opt(&k, &v, &options));
                        continue;
                    }
                    Target::Unopened => continue,
                }
                model.apply(s, &k, Some(&v));
            }
            KsOp::Delete(s, k) => {
                match target(&handles, &model, s) {
                    Target::Default => db.delete(&k).unwrap(),
                    Target::Live(h) => h.delete(&k).unwrap(),
                    Target::Dropped(h) => {
                        dropped(h.delete(&k));
                        continue;
                    }
                    Target::Unopened => continue,
                }
                model.apply(s, &k, None);
            }
            KsOp::Batch(entries, sync) => {
                let mut batch = WriteBatch::new();
                let mut applied = Vec::new();
                let mut refused = false;
                for (s, k, v) in &entries {
                    match (target(&handles, &model, *s), v) {
                        (Target::Default, Some(v)) => batch.put(k, v),
                        (Target::Default, None) => batch.delete(k),
                        (Target::Live(h) | Target::Dropped(h), Some(v)) => batch.put_in(h, k, v),
                        (Target::Live(h) | Target::Dropped(h), None) => batch.delete_in(h, k),
                        (Target::Unopened, _) => continue,
                    };
                    refused |= matches!(target(&handles, &model, *s), Target::Dropped(_));
                    applied.push((*s, k, v));
                }
                let result = db.write(batch, &WriteOptions::new().sync(sync));
                if refused {
                    // Nothing of a batch with a dropped keyspace is applied.
                    dropped(result);
                } else {
                    result.unwrap();
                    for (s, k, v) in applied {
                        model.apply(s, k, v.as_deref());
                    }
                }
            }
            KsOp::DeleteRange(s, a, b, sync) => {
                let (start, end) = nonempty(a, b);
                let options = WriteOptions::new().sync(sync);
                match target(&handles, &model, s) {
                    Target::Default => db.delete_range_opt(&start, &end, &options).unwrap(),
                    Target::Live(h) => h.delete_range_opt(&start, &end, &options).unwrap(),
                    Target::Dropped(h) => {
                        dropped(h.delete_range_opt(&start, &end, &options));
                        continue;
                    }
                    Target::Unopened => continue,
                }
                model_delete_range(model.space_mut(s), &start, &end);
            }
            KsOp::Get(s, k) => {
                let got = match target(&handles, &model, s) {
                    Target::Default => db.get(&k),
                    Target::Live(h) => h.get(&k),
                    Target::Dropped(h) => {
                        dropped(h.get(&k));
                        continue;
                    }
                    Target::Unopened => continue,
                };
                assert_eq!(
                    got.unwrap().map(|v| v.to_vec()),
                    model.space(s).get(&k).cloned()
                );
            }
            KsOp::Range(s, lo, hi, order) => {
                let it = match target(&handles, &model, s) {
                    Target::Default => db.range((lo.clone(), hi.clone())),
                    Target::Live(h) => h.range((lo.clone(), hi.clone())),
                    Target::Dropped(h) => {
                        let mut it = h.range((lo, hi));
                        assert!(matches!(it.next(), Some(Err(Error::KeyspaceDropped(_)))));
                        continue;
                    }
                    Target::Unopened => continue,
                };
                let rev = matches!(order, Order::Reverse);
                assert_eq!(
                    collect_in(it, order),
                    model_range(model.space(s), &lo, &hi, rev)
                );
            }
            KsOp::Prefix(s, p, rev) => {
                let it = match target(&handles, &model, s) {
                    Target::Default => db.prefix(&p),
                    Target::Live(h) => h.prefix(&p),
                    Target::Dropped(_) | Target::Unopened => continue,
                };
                let want: Vec<_> =
                    model_range(model.space(s), &Bound::Unbounded, &Bound::Unbounded, rev)
                        .into_iter()
                        .filter(|(k, _)| k.starts_with(&p))
                        .collect();
                assert_eq!(collect(it, rev), want);
            }
            KsOp::Snapshot => snapshots.push(FrozenKs {
                snapshot: db.snapshot(),
                default: model.default.clone(),
                named: model.named.values().cloned().collect(),
            }),
            KsOp::Txn {
                reads,
                writes,
                scan,
                commit,
            } => run_txn(&db, &handles, &mut model, &reads, &writes, scan, commit),
            KsOp::TxnConflict(s, k, v) => {
                let mut txn = db.transaction();
                match target(&handles, &model, s) {
                    Target::Default => {
                        txn.get(&k).unwrap();
                        db.put(&k, &v).unwrap();
                        txn.put(&k, b"txn");
                    }
                    Target::Live(h) => {
                        txn.get_in(h, &k).unwrap();
                        h.put(&k, &v).unwrap();
                        txn.put_in(h, &k, b"txn");
                    }
                    Target::Dropped(_) | Target::Unopened => continue,
                }
                model.apply(s, &k, Some(&v));
                let result = txn.commit(&WriteOptions::default());
                assert!(matches!(result, Err(Error::Conflict(_))), "{result:?}");
            }
            KsOp::CompareAndSwap(k, right, new) => {
                let current = model.default.get(&k).cloned();
                let expected = if right {
                    current.clone()
                } else {
                    // A value the key cannot have: values are under 24 bytes.
                    Some(vec![7; 30])
                };
                let result = db
                    .compare_and_swap(&k, expected.as_deref(), new.as_deref())
                    .unwrap();
                if right {
                    result.unwrap();
                    model.apply(None, &k, new.as_deref());
                } else {
                    let e = result.unwrap_err();
                    assert_eq!(e.current.map(|v| v.to_vec()), current);
                }
            }
            KsOp::UpdateAndFetch(k) => {
                let got = db
                    .update_and_fetch(&k, |v| {
                        let mut v = v.map(<[u8]>::to_vec).unwrap_or_default();
                        v.push(b'+');
                        Some(v)
                    })
                    .unwrap();
                let mut want = model.default.get(&k).cloned().unwrap_or_default();
                want.push(b'+');
                assert_eq!(got.map(|v| v.to_vec()), Some(want.clone()));
                model.default.insert(k, want);
            }
            KsOp::Checkpoint => {
                // The cleaner of a drop may write tombstones at any time.
                let cleaning = db.stats().keyspaces_dropping > 0;
                db.checkpoint_now().unwrap();
                if !cleaning {
                    assert_eq!(db.stats().memtable_entries, 0);
                }
            }
            KsOp::Reopen => {
                snapshots.clear();
                handles.clear();
                drop(db);
                db = open_fault(&fs, options.clone()).unwrap();
                db.check().unwrap();
                handles = reopen_handles(&db, &model);
            }
        }
        assert_eq!(db.keyspace_names().unwrap(), model.names());
        check_snapshots(&snapshots, &handles, &model);
    }
    assert_eq!(db_all(&db, &handles, &model), model.all());
    snapshots.clear();
    handles.clear();
    drop(db);
    let db = open_fault(&fs, options).unwrap();
    db.check().unwrap();
    let handles = reopen_handles(&db, &model);
    assert_eq!(db_all(&db, &handles, &model), model.all());
    // The drops' keys are gone from the tree once the cleaner is done.
    wait_for_cleaning(&db);
    db.checkpoint_now().unwrap();
    assert_eq!(db.check().unwrap().tree_keys, model.tree_keys());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Keyspaces opened, written (alone and in batches across them),
    /// read, dropped and created again, transactions, snapshots and
    /// reopens, against a map per keyspace.
    #[test]
    fn keyspaces_match_a_map_per_keyspace(ops in prop::collection::vec(ks_op(), 1..150)) {
        run_keyspaces(ops, small_options());
    }

    /// The same with checkpoints every few writes into a tree of tiny
    /// pages.
    #[test]
    fn keyspaces_with_checkpoints_match_a_map_per_keyspace(
        ops in prop::collection::vec(ks_op(), 1..200)
    ) {
        run_keyspaces(ops, checkpointing_options());
    }
}
