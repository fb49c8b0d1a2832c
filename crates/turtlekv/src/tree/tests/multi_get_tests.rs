//! Batched lookups: the chunks `prefetch_lookups` predicts are the ones
//! the lookups then read.

use super::harness::{Harness, Rng, key, random_batch, small_config};
use crate::tree::read::memo::Memo;

/// Out of cache, every lookup after a prefetch of its batch finds its
/// chunk prefetched, but for the filters' false positives (a lookup that
/// a filter sends into the wrong segment reads on from there).
#[test]
fn lookups_read_the_chunks_their_prefetch_predicted() {
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
        h.tree.prefetch_lookups(h.root, &memo, &refs).unwrap();
        for k in &keys {
            let got = h.tree.get(h.root, k).unwrap();
            assert_eq!(got.as_ref(), h.model.get(k), "{k:?}");
            lookups += 1;
        }
    }
    let missed = h.io.reads_not_prefetched();
    assert!(
        missed * 50 <= lookups,
        "{missed} of {lookups} lookups read a chunk not prefetched"
    );
}
