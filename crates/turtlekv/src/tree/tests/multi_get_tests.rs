//! Batched lookups: `get_many` answers as `get` does, and reads the chunks
//! its lookups need through one set of streamed reads.

use super::harness::{Harness, Rng, key, random_batch, small_config};
use crate::tree::read::memo::Memo;

/// Out of cache, every chunk a batch's lookups read is read through the
/// batch's streamed reads, in flight with the others (a lookup that a
/// filter's false positive sends into the wrong segment pushes its next
/// read there too); and each answer is the model's.
#[test]
fn batched_lookups_answer_from_the_chunks_read_together() {
    let mut rng = Rng::new(31);
    let mut h = Harness::new(small_config(512));
    for _ in 0..60 {
        h.apply(random_batch(&mut rng, 6000, 400, 10));
    }
    assert!(h.max_height >= 2, "height {}", h.max_height);
    let memo = Memo::default();
    let mut lookups = 0;
    h.io.track_prefetches();
    for _ in 0..40 {
        h.io.drop_cache(true);
        let keys: Vec<_> = (0..32).map(|_| key(rng.below(7000))).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let values = h.tree.get_many(h.root, &memo, &refs).unwrap();
        for (k, v) in keys.iter().zip(values) {
            assert_eq!(v.as_ref().map(|v| v.stored()), h.model.get(k), "{k:?}");
            lookups += 1;
        }
    }
    let missed = h.io.reads_not_prefetched();
    assert_eq!(
        missed, 0,
        "{missed} of {lookups} lookups read a chunk not read with their batch"
    );
    assert_eq!(h.tree.get_many(None, &memo, &[b"a"]).unwrap(), vec![None]);
}
