//! MemTable tests: versions, bounds and sealing against a model, and
//! readers running beside the writer.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use proptest::test_runner::TestCaseError;

use super::node::{KeyParts, MAX_HEIGHT, compare};
use super::search::within;
use super::{BTreeMemTable, Direction, MemTable, SkipListMemTable, Versioned};
use crate::mem::MappingPool;
use crate::values::Value;

/// What the tests need of each MemTable structure.
trait Table: MemTable + Sized {
    fn with_capacity_in(capacity_bytes: u64, pool: Option<std::sync::Arc<MappingPool>>) -> Self;

    fn with_capacity(capacity_bytes: u64) -> Self {
        Self::with_capacity_in(capacity_bytes, None)
    }

    fn new() -> Self {
        Self::with_capacity(1 << 20)
    }
}

impl Table for SkipListMemTable {
    fn with_capacity_in(capacity_bytes: u64, pool: Option<std::sync::Arc<MappingPool>>) -> Self {
        SkipListMemTable::with_capacity_in(capacity_bytes, pool)
    }
}

impl Table for BTreeMemTable {
    fn with_capacity_in(capacity_bytes: u64, pool: Option<std::sync::Arc<MappingPool>>) -> Self {
        BTreeMemTable::with_capacity_in(capacity_bytes, pool)
    }
}

/// `native` in a normal build, `miri` under Miri, which runs the same
/// code (every unsafe block of the MemTables) a thousand times slower.
const fn scaled(native: u64, miri: u64) -> u64 {
    if cfg!(miri) { miri } else { native }
}

/// Proptest's settings: few cases under Miri, and no regression files
/// (Miri keeps the file system out of reach).
fn proptest_config() -> proptest::test_runner::Config {
    if cfg!(miri) {
        proptest::test_runner::Config {
            cases: 4,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        }
    } else {
        proptest::test_runner::Config::default()
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn v(s: &str) -> Value {
    Value::Inline(b(s))
}

fn table<T: Table>() -> T {
    let t = T::new();
    t.insert(b("a"), 1, Some(v("a1")));
    t.insert(b("a"), 5, Some(v("a5")));
    t.insert(b("b"), 2, None);
    t.insert(b("b"), 1, Some(v("b1")));
    t.insert(b("c"), 7, Some(v("c7")));
    t
}

fn get_sees_the_newest_visible_version<T: Table>() {
    let t = table::<T>();
    assert_eq!(t.get(b"a", 4), Some(Some(v("a1"))));
    assert_eq!(t.get(b"a", 5), Some(Some(v("a5"))));
    assert_eq!(t.get(b"a", 0), None);
    assert_eq!(t.get(b"b", 9), Some(None));
    assert_eq!(t.get(b"b", 1), Some(Some(v("b1"))));
    assert_eq!(t.get(b"c", 6), None);
    assert_eq!(t.get(b"d", 9), None);
}

/// A value pointer keeps its kind in the entry, before and after the
/// MemTable is sealed: the same bytes stored in place read back in place.
fn value_pointers_keep_their_kind<T: Table>() {
    let t = T::new();
    let bytes = b("0123456789ab");
    t.insert(b("p"), 1, Some(Value::Pointer(bytes.clone())));
    t.insert(b("q"), 2, Some(Value::Inline(bytes.clone())));
    for sealed in [false, true] {
        assert_eq!(t.get(b"p", 9), Some(Some(Value::Pointer(bytes.clone()))));
        assert_eq!(t.get(b"q", 9), Some(Some(Value::Inline(bytes.clone()))));
        let all = scan(&t, 9, Direction::Forward, 10);
        let kinds: Vec<bool> = all
            .iter()
            .map(|(_, v)| v.as_ref().unwrap().is_pointer())
            .collect();
        assert_eq!(kinds, [true, false], "sealed: {sealed}");
        t.seal();
    }
}

fn scan(t: &dyn MemTable, seq: u64, dir: Direction, limit: usize) -> Vec<Versioned> {
    let mut out = Vec::new();
    t.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        seq,
        dir,
        limit,
        &mut out,
    );
    out
}

fn scans_resolve_versions_both_ways<T: Table>() {
    let t = table::<T>();
    let fwd = scan(&t, 6, Direction::Forward, 10);
    assert_eq!(fwd, vec![(b("a"), Some(v("a5"))), (b("b"), None)]);
    let rev = scan(&t, 6, Direction::Reverse, 10);
    assert_eq!(rev, vec![(b("b"), None), (b("a"), Some(v("a5")))]);
    let rev = scan(&t, 1, Direction::Reverse, 1);
    assert_eq!(rev, vec![(b("b"), Some(v("b1")))]);
}

fn scan_bounds_cover_all_versions<T: Table>() {
    let t = table::<T>();
    let mut out = Vec::new();
    t.scan(
        Bound::Excluded(b"a"),
        Bound::Included(b"c"),
        9,
        Direction::Forward,
        10,
        &mut out,
    );
    assert_eq!(out, vec![(b("b"), None), (b("c"), Some(v("c7")))]);
    out.clear();
    t.scan(
        Bound::Included(b"a"),
        Bound::Excluded(b"c"),
        9,
        Direction::Reverse,
        10,
        &mut out,
    );
    assert_eq!(out, vec![(b("b"), None), (b("a"), Some(v("a5")))]);
}

proptest::proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn prefix_shortcut_orders_like_plain_comparison(
        a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 1..12),
        b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 1..12),
        sa in 0u64..3,
        sb in 0u64..3,
    ) {
        let expected = a.cmp(&b).then(sb.cmp(&sa));
        let got = compare(KeyParts::new(&a, sa), KeyParts::new(&b, sb));
        proptest::prop_assert_eq!(got, expected);
    }
}

#[test]
fn size_counts_every_version() {
    let t = table::<SkipListMemTable>();
    assert_eq!(t.len(), 5);
    let filter_bytes = SkipListMemTable::new().size_bytes();
    // Five headers and towers of 1..=MAX_HEIGHT pointers, 5 key bytes,
    // 8 value bytes, each node rounded up to 8 bytes.
    let user_bytes = 5 + 8;
    let least = filter_bytes + 5 * 40 + user_bytes;
    let most = filter_bytes + 5 * (32 + 8 * MAX_HEIGHT as u64 + 7) + user_bytes;
    assert!(
        (least..=most).contains(&t.size_bytes()),
        "{}",
        t.size_bytes()
    );
}

#[test]
fn btree_size_counts_every_version_and_its_nodes() {
    let t = table::<BTreeMemTable>();
    // An empty table holds the filter and its root leaf; each version adds
    // its 32-byte header, key and value, rounded up to 8 bytes (all 40).
    let empty = BTreeMemTable::with_capacity(1 << 20).size_bytes();
    assert_eq!(t.size_bytes(), empty + 5 * 40);
}

/// Readers at a fixed snapshot while the writer splits nodes at every
/// level: they must see exactly the snapshot's versions (the even keys'
/// first values), never a gap, an odd key or a newer version, through
/// gets and through scans both ways.
#[test]
fn btree_readers_at_a_snapshot_see_it_whole_through_splits() {
    use std::sync::atomic::AtomicBool;
    const KEYS: u64 = scaled(20_000, 300);
    let t = BTreeMemTable::with_capacity(4 << 20);
    let key = |k: u64| Bytes::from(k.to_be_bytes().to_vec());
    let old = |k: u64| Bytes::from(format!("old {k}"));
    for i in 0..KEYS {
        let k = 2 * (i * 7919 % KEYS);
        t.insert(key(k), i + 1, Some(Value::Inline(old(k))));
    }
    // Evens 0, 2, .., 2 * (KEYS - 1), each once: 7919 is prime to KEYS, so
    // the scramble above is a permutation, as is the one below.
    assert_eq!(t.len() as u64, KEYS);
    let snapshot = KEYS;
    let writing = AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..2 * KEYS {
                let k = i * 7919 % (2 * KEYS);
                t.insert(
                    key(k),
                    snapshot + 1 + i,
                    Some(Value::Inline(Bytes::from_static(b"new"))),
                );
            }
            writing.store(false, Ordering::Release);
        });
        for seed in [7u64, 11] {
            let (t, writing) = (&t, &writing);
            s.spawn(move || {
                let mut rng = seed;
                let mut rounds = 0;
                while writing.load(Ordering::Acquire) || rounds < scaled(500, 5) {
                    rounds += 1;
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let lo = rng % (2 * KEYS);
                    let even = lo & !1;
                    assert_eq!(
                        t.get(&key(even), snapshot),
                        Some(Some(Value::Inline(old(even))))
                    );
                    assert_eq!(t.get(&key(even | 1), snapshot), None);
                    let mut out = Vec::new();
                    let (lower, limit) = (key(lo), 50);
                    t.scan(
                        Bound::Included(&lower),
                        Bound::Unbounded,
                        snapshot,
                        Direction::Forward,
                        limit,
                        &mut out,
                    );
                    let want: Vec<_> = (lo.div_ceil(2) * 2..2 * KEYS)
                        .step_by(2)
                        .take(limit)
                        .map(|k| (key(k), Some(Value::Inline(old(k)))))
                        .collect();
                    assert_eq!(out, want, "forward from {lo}");
                    out.clear();
                    t.scan(
                        Bound::Unbounded,
                        Bound::Included(&lower),
                        snapshot,
                        Direction::Reverse,
                        limit,
                        &mut out,
                    );
                    let want: Vec<_> = (0..=even)
                        .rev()
                        .step_by(2)
                        .take(limit)
                        .map(|k| (key(k), Some(Value::Inline(old(k)))))
                        .collect();
                    assert_eq!(out, want, "reverse from {lo}");
                }
            });
        }
    });
    assert_eq!(t.len() as u64, 3 * KEYS);
    assert_eq!(t.check_structure(), Ok(()));
}

fn sealed_reads_share_the_arena_and_match_copies<T: Table>() {
    let t = table::<T>();
    let before = (scan(&t, 6, Direction::Forward, 10), t.get(b"a", 9));
    t.seal();
    let after = (scan(&t, 6, Direction::Forward, 10), t.get(b"a", 9));
    assert_eq!(before, after);
    // Zero-copy: two reads of one value point at the same memory.
    let (x, y) = (t.get(b"c", 9), t.get(b"c", 9));
    let ptr = |v: Option<Option<Value>>| v.flatten().expect("a value").stored().as_ptr();
    assert_eq!(ptr(x), ptr(y));
}

fn insert_after_seal_is_refused<T: Table>() {
    let t = table::<T>();
    t.seal();
    t.insert(b("z"), 9, None);
}

fn large_values_get_chunks_of_their_own<T: Table>() {
    let t = T::with_capacity(64 << 10);
    let big = Bytes::from(vec![7u8; 256 << 10]);
    for i in 0..8u64 {
        t.insert(
            Bytes::from(i.to_be_bytes().to_vec()),
            i + 1,
            Some(Value::Inline(big.clone())),
        );
        t.insert(Bytes::from(vec![b'k'; 512]), 100 + i, Some(v("small")));
    }
    for i in 0..8u64 {
        assert_eq!(
            t.get(&i.to_be_bytes(), u64::MAX),
            Some(Some(Value::Inline(big.clone())))
        );
    }
    assert_eq!(t.get(&[b'k'; 512], 103), Some(Some(v("small"))));
    assert_eq!(t.check_structure(), Ok(()));
    let charged = t.size_bytes();
    assert!((8 * (256 << 10)..9 * (256 << 10) + (64 << 10)).contains(&charged));
}

/// Versions by (key, newest first).
type Model = BTreeMap<(Vec<u8>, Reverse<u64>), Option<Vec<u8>>>;

/// A forward or reverse scan of `model` at `seq` within bounds.
fn model_scan(
    model: &Model,
    (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
    seq: u64,
    direction: Direction,
) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut latest: BTreeMap<Vec<u8>, Option<Vec<u8>>> = Default::default();
    for ((k, Reverse(s)), v) in model {
        let inside = within(k, lower, |k, b| k > b, |k, b| k >= b)
            && within(k, upper, |k, b| k < b, |k, b| k <= b);
        if inside && *s <= seq && !latest.contains_key(k) {
            latest.insert(k.clone(), v.clone());
        }
    }
    let mut out: Vec<_> = latest.into_iter().collect();
    if direction == Direction::Reverse {
        out.reverse();
    }
    out
}

fn bound(kind: u8, key: &[u8]) -> Bound<&[u8]> {
    match kind {
        0 => Bound::Included(key),
        1 => Bound::Excluded(key),
        _ => Bound::Unbounded,
    }
}

type ModelWrites = Vec<(Vec<u8>, Option<u8>)>;
type ModelReads = Vec<(Vec<u8>, u64, u8, u8, usize)>;

fn reads_match_a_model_before_and_after_sealing<T: Table>(
    writes: ModelWrites,
    reads: ModelReads,
) -> Result<(), TestCaseError> {
    let t = T::with_capacity(64 << 10);
    let mut model = BTreeMap::new();
    for (i, (key, value)) in writes.iter().enumerate() {
        let seq = i as u64 + 1;
        let value = value.map(|v| vec![v; v as usize % 17]);
        t.insert(
            Bytes::from(key.clone()),
            seq,
            value.clone().map(|v| Value::Inline(Bytes::from(v))),
        );
        model.insert((key.clone(), Reverse(seq)), value);
    }
    proptest::prop_assert_eq!(t.check_structure(), Ok(()));
    for sealed in [false, true] {
        if sealed {
            t.seal();
        }
        for (key, seq, lo, hi, limit) in &reads {
            let want = model_scan(
                &model,
                (Bound::Included(key), Bound::Included(key)),
                *seq,
                Direction::Forward,
            );
            let got = t.get(key, *seq).map(|v| v.map(|v| v.stored().to_vec()));
            proptest::prop_assert_eq!(got, want.first().map(|(_, v)| v.clone()));
            let other = [key[0].wrapping_add(1)];
            let (a, b) = if key.as_slice() <= other.as_slice() {
                (&key[..], &other[..])
            } else {
                (&other[..], &key[..])
            };
            let bounds = (bound(*lo, a), bound(*hi, b));
            for direction in [Direction::Forward, Direction::Reverse] {
                let mut want = model_scan(&model, bounds, *seq, direction);
                want.truncate(*limit);
                let mut out = Vec::new();
                t.scan(bounds.0, bounds.1, *seq, direction, *limit, &mut out);
                let got: Vec<_> = out
                    .into_iter()
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.stored().to_vec())))
                    .collect();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }
    Ok(())
}

fn readers_see_a_sorted_prefix_while_one_thread_writes<T: Table>() {
    use std::sync::atomic::AtomicU64;
    const KEYS: u64 = scaled(20_000, 300);
    let t = T::with_capacity(1 << 20);
    // Keys in a scrambled order; `written` says how many are in.
    let key = |i: u64| Bytes::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes().to_vec());
    let written = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..KEYS {
                t.insert(key(i), i + 1, Some(Value::Inline(key(i))));
                written.store(i + 1, Ordering::Release);
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                while written.load(Ordering::Acquire) < KEYS {
                    let n = written.load(Ordering::Acquire);
                    for i in (0..n).step_by(97) {
                        assert_eq!(t.get(&key(i), u64::MAX), Some(Some(Value::Inline(key(i)))));
                    }
                    let mut out = Vec::new();
                    let all = Bound::Unbounded;
                    t.scan(all, all, u64::MAX, Direction::Forward, usize::MAX, &mut out);
                    assert!(out.len() as u64 >= n);
                    assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
                    assert!(
                        out.iter()
                            .all(|(k, v)| v.as_ref().map(Value::stored) == Some(k))
                    );
                }
            });
        }
    });
    assert_eq!(t.len() as u64, KEYS);
    assert_eq!(t.check_structure(), Ok(()));
}

/// Inserts from hints made some inserts earlier (stale by up to 40
/// nodes, past `MAX_HINT_STEPS`), or made by another MemTable, build
/// the same MemTable as plain inserts.
fn prepared_inserts_match_a_model<T: Table>(
    writes: Vec<(Vec<u8>, usize, bool)>,
) -> Result<(), TestCaseError> {
    let t = T::with_capacity(64 << 10);
    let other = T::with_capacity(64 << 10);
    other.insert(b("x"), 1, None);
    let mut model = BTreeMap::new();
    // The hint of write j is made before write j - delay_j is inserted.
    let made_at: Vec<usize> = writes
        .iter()
        .enumerate()
        .map(|(j, w)| j.saturating_sub(w.1))
        .collect();
    let mut hints: Vec<Option<super::InsertHint>> = writes.iter().map(|_| None).collect();
    for (i, (key, _, foreign)) in writes.iter().enumerate() {
        for j in (i..writes.len()).filter(|&j| made_at[j] == i) {
            let source = if writes[j].2 { &other } else { &t };
            hints[j] = Some(source.prepare_insert(&writes[j].0));
        }
        let seq = i as u64 + 1;
        let hint = hints[i].take().expect("made at or before its insert");
        proptest::prop_assert_eq!(
            std::ptr::eq(hint.owner_for_tests(), std::ptr::from_ref(&t).cast()),
            !foreign
        );
        t.insert_prepared(
            Bytes::from(key.clone()),
            seq,
            Some(Value::Inline(Bytes::from(vec![i as u8]))),
            &hint,
        );
        model.insert((key.clone(), Reverse(seq)), Some(vec![i as u8]));
    }
    proptest::prop_assert_eq!(t.check_structure(), Ok(()));
    let all = (Bound::Unbounded, Bound::Unbounded);
    for seq in [1, writes.len() as u64 / 2, u64::MAX] {
        let want = model_scan(&model, all, seq, Direction::Forward);
        let mut out = Vec::new();
        t.scan(all.0, all.1, seq, Direction::Forward, usize::MAX, &mut out);
        let got: Vec<_> = out
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.map(|v| v.stored().to_vec())))
            .collect();
        proptest::prop_assert_eq!(got, want);
    }
    Ok(())
}

/// Two writers search for their keys' places at the same time as each
/// other's inserts, then insert in turn (as group-commit leaders do),
/// while readers check that what they see stays sorted and whole.
fn prepared_inserts_from_two_writers_beside_readers<T: Table>() {
    use std::sync::atomic::AtomicU64;
    const KEYS_PER_WRITER: u64 = scaled(10_000, 150);
    let t = T::with_capacity(1 << 20);
    let key = |i: u64| Bytes::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes().to_vec());
    let next_seq = parking_lot::Mutex::new(1u64);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2 {
            let (t, next_seq, done) = (&t, &next_seq, &done);
            s.spawn(move || {
                for i in 0..KEYS_PER_WRITER {
                    let k = key(i * 2 + w);
                    let hint = t.prepare_insert(&k);
                    let mut seq = next_seq.lock();
                    t.insert_prepared(k.clone(), *seq, Some(Value::Inline(k.clone())), &hint);
                    *seq += 1;
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                while done.load(Ordering::Acquire) < 2 {
                    let mut out = Vec::new();
                    let all = Bound::Unbounded;
                    t.scan(all, all, u64::MAX, Direction::Forward, usize::MAX, &mut out);
                    assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
                    assert!(
                        out.iter()
                            .all(|(k, v)| v.as_ref().map(Value::stored) == Some(k))
                    );
                }
            });
        }
    });
    assert_eq!(t.len() as u64, 2 * KEYS_PER_WRITER);
    assert_eq!(t.check_structure(), Ok(()));
    for i in 0..2 * KEYS_PER_WRITER {
        assert_eq!(t.get(&key(i), u64::MAX), Some(Some(Value::Inline(key(i)))));
    }
}

/// A hint made before a hundred keys were linked in below its key: the
/// insert walks past them or searches from the top, and lands right.
fn a_hint_stale_by_many_inserts_still_lands_right<T: Table>() {
    let t = T::new();
    t.insert(b("a"), 1, None);
    let hint = t.prepare_insert(b"m");
    for i in 0..100u64 {
        t.insert(Bytes::from(format!("l{i:03}")), i + 2, None);
    }
    t.insert_prepared(b("m"), 200, Some(v("m")), &hint);
    assert_eq!(t.check_structure(), Ok(()));
    assert_eq!(t.get(b"m", u64::MAX), Some(Some(v("m"))));
    let mut out = Vec::new();
    t.scan(
        Bound::Excluded(b"l099"),
        Bound::Unbounded,
        u64::MAX,
        Direction::Forward,
        5,
        &mut out,
    );
    assert_eq!(out, vec![(b("m"), Some(v("m")))]);
}

/// A MemTable whose arena reuses the chunks of one dropped before it (from
/// the page cache's pool) holds exactly what was written to it: reused
/// memory is not zeroed, and nothing of the old entries shows through.
fn a_memtable_on_reused_chunks_holds_only_its_own_entries<T: Table>() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    use crate::mem::MappingPool;

    let capacity = Arc::new(AtomicU64::new(64 << 20));
    let pool = Arc::new(MappingPool::new(capacity, Arc::new(AtomicU64::new(0))));
    let key = |i: u64| Bytes::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes().to_vec());
    let first = T::with_capacity_in(1 << 20, Some(pool.clone()));
    for i in 0..scaled(6_000, 1_000) {
        first.insert(
            key(i),
            i + 1,
            Some(Value::Inline(Bytes::from(vec![0xFF; 100]))),
        );
    }
    drop(first);
    let kept = pool.kept_bytes();
    assert!(kept > 0, "the dropped table's chunks were kept");

    let second = T::with_capacity_in(1 << 20, Some(pool.clone()));
    let mut model = BTreeMap::new();
    for i in (0..scaled(3_000, 500)).rev() {
        let value = Bytes::from(vec![i as u8; 1 + (i % 90) as usize]);
        second.insert(key(i * 7), i + 1, Some(Value::Inline(value.clone())));
        model.insert(key(i * 7), value);
    }
    assert!(
        pool.kept_bytes() < kept,
        "the second table took kept chunks"
    );
    second.check_structure().unwrap();
    for (k, v) in &model {
        assert_eq!(
            second.get(k, u64::MAX),
            Some(Some(Value::Inline(v.clone())))
        );
    }
    assert_eq!(second.get(&key(1), u64::MAX), None, "an old entry's key");
    let mut all = Vec::new();
    second.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        u64::MAX,
        Direction::Forward,
        usize::MAX,
        &mut all,
    );
    assert_eq!(all.len(), model.len());
}

/// Every test above, for each MemTable structure.
macro_rules! memtable_tests {
    ($module:ident, $table:ty) => {
        mod $module {
            use super::*;

            #[test]
            fn get_sees_the_newest_visible_version() {
                super::get_sees_the_newest_visible_version::<$table>();
            }

            #[test]
            fn scans_resolve_versions_both_ways() {
                super::scans_resolve_versions_both_ways::<$table>();
            }

            #[test]
            fn value_pointers_keep_their_kind() {
                super::value_pointers_keep_their_kind::<$table>();
            }

            #[test]
            fn scan_bounds_cover_all_versions() {
                super::scan_bounds_cover_all_versions::<$table>();
            }

            #[test]
            fn sealed_reads_share_the_arena_and_match_copies() {
                super::sealed_reads_share_the_arena_and_match_copies::<$table>();
            }

            #[test]
            #[should_panic(expected = "insert into a sealed MemTable")]
            fn insert_after_seal_is_refused() {
                super::insert_after_seal_is_refused::<$table>();
            }

            #[test]
            fn large_values_get_chunks_of_their_own() {
                super::large_values_get_chunks_of_their_own::<$table>();
            }

            #[test]
            fn readers_see_a_sorted_prefix_while_one_thread_writes() {
                super::readers_see_a_sorted_prefix_while_one_thread_writes::<$table>();
            }

            #[test]
            fn prepared_inserts_from_two_writers_beside_readers() {
                super::prepared_inserts_from_two_writers_beside_readers::<$table>();
            }

            #[test]
            fn a_hint_stale_by_many_inserts_still_lands_right() {
                super::a_hint_stale_by_many_inserts_still_lands_right::<$table>();
            }

            #[test]
            fn a_memtable_on_reused_chunks_holds_only_its_own_entries() {
                super::a_memtable_on_reused_chunks_holds_only_its_own_entries::<$table>();
            }

            proptest::proptest! {
                #![proptest_config(proptest_config())]

                #[test]
                fn reads_match_a_model_before_and_after_sealing(
                    writes in proptest::collection::vec(
                        (proptest::collection::vec(0u8..4, 1..4), proptest::option::of(0u8..255)),
                        1..200,
                    ),
                    reads in proptest::collection::vec(
                        (proptest::collection::vec(0u8..4, 1..4), 0u64..220, 0u8..3, 0u8..3, 1usize..8),
                        1..20,
                    ),
                ) {
                    super::reads_match_a_model_before_and_after_sealing::<$table>(writes, reads)?;
                }

                #[test]
                fn prepared_inserts_match_a_model(
                    writes in proptest::collection::vec(
                        (proptest::collection::vec(0u8..6, 1..4), 0usize..40, proptest::bool::weighted(0.1)),
                        1..300,
                    ),
                ) {
                    super::prepared_inserts_match_a_model::<$table>(writes)?;
                }
            }
        }
    };
}

memtable_tests!(skiplist, SkipListMemTable);
memtable_tests!(btree, BTreeMemTable);

/// A transaction's check takes a written key's newest version from its
/// insert hint only while the hint's leaf is unchanged.
#[test]
fn hints_tell_the_newest_version_until_their_leaf_changes() {
    let t: BTreeMemTable = table();
    for i in 0..200u64 {
        t.insert(Bytes::from(format!("k{i:03}")), i + 1, Some(v("v")));
    }
    let hint = t.prepare_insert(b"k100");
    assert_eq!(t.newest_seq_hinted(b"k100", &hint), Some(Some(101)));
    assert_eq!(t.newest_seq(b"k100"), Some(101));
    let absent = t.prepare_insert(b"k100x");
    assert_eq!(t.newest_seq_hinted(b"k100x", &absent), Some(None));
    // A newer version of the key goes into the hinted leaf: the hint can
    // no longer tell, and a lookup finds the new version.
    t.insert(b("k100"), 500, None);
    assert_eq!(t.newest_seq_hinted(b"k100", &hint), None);
    assert_eq!(t.newest_seq(b"k100"), Some(500));
    // Another MemTable's hint tells nothing.
    let other: BTreeMemTable = table();
    assert_eq!(other.newest_seq_hinted(b"k100", &hint), None);
}
