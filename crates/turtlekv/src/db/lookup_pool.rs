//! Threads that take half of a large batched lookup (`Db::multi_get`),
//! so that while one half walks its paths the other half's reads are in
//! flight: a batch's walks, its reads and its answers otherwise run one
//! after the other on the caller's thread, and its reads are in flight
//! only part of the time.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::Result;
use crate::store::TreeVersion;

/// Threads of the pool. They mostly wait on reads: four serve two client
/// threads' batches, each split in two, with room to spare.
const LOOKUP_THREADS: usize = 4;
/// Batches smaller than this run whole on the caller's thread: their
/// walks are short, and a hand-off would cost more than it overlaps.
/// (Splits in four measured no better than in two: 2.51 against 2.60
/// times the single gets' throughput, `docs/benchmark-log.md`.)
const SPLIT_MIN_KEYS: usize = 16;

/// The pool, made on first use; `None` if its threads could not start.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(LOOKUP_THREADS)
            .thread_name(|i| format!("turtlekv-lookup-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// What `tree.get_many` answered, and the page reads it made.
type Counted = Result<(Vec<Option<Bytes>>, u64)>;

/// `tree.get_many(keys)`, a large batch split in two halves that run at
/// once (the second on the pool), and the page reads it made.
pub(crate) fn get_many(tree: &dyn TreeVersion, keys: &[&[u8]]) -> Counted {
    let counted = |keys: &[&[u8]]| -> Counted {
        let before = crate::page::thread_read_ios();
        let values = tree.get_many(keys)?;
        Ok((values, crate::page::thread_read_ios() - before))
    };
    let Some(pool) = pool().filter(|_| keys.len() >= SPLIT_MIN_KEYS) else {
        return counted(keys);
    };
    let (first, second) = keys.split_at(keys.len() / 2);
    let mut second_half = None;
    let first_half = pool.in_place_scope(|scope| {
        scope.spawn(|_| second_half = Some(counted(second)));
        counted(first)
    });
    let (mut values, first_reads) = first_half?;
    let (rest, second_reads) = second_half.expect("the scope waited for the second half")?;
    values.extend(rest);
    Ok((values, first_reads + second_reads))
}
