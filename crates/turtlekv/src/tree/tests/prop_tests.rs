//! Property test: arbitrary sequences of batches (puts and deletes over a
//! small key space, values up to a block, some larger than a block) keep the
//! tree equal to a `BTreeMap`, with every invariant checked after each batch.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use proptest::prelude::*;

use super::harness::{Harness, Rng, key, small_config};

fn batch() -> impl Strategy<Value = Vec<(Bytes, Option<Bytes>)>> {
    let entry = (0u64..3000, prop::option::weighted(0.7, 0usize..300));
    prop::collection::vec(entry, 1..400).prop_map(|entries| {
        let mut batch = BTreeMap::new();
        for (k, v) in entries {
            batch.insert(key(k), v.map(|len| Bytes::from(vec![(k % 251) as u8; len])));
        }
        batch.into_iter().collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn tree_matches_btreemap(batches in prop::collection::vec(batch(), 1..40), node_size in prop::sample::select(vec![512u64, 1024])) {
        let mut h = Harness::new(small_config(node_size));
        let mut rng = Rng::new(batches.len() as u64);
        for b in batches {
            h.apply(b);
            h.assert_matches_model(&mut rng, 10);
        }
        h.assert_scans_match(&mut rng, 10);
        let all: Vec<_> = h.tree.scan(h.root, Bound::Unbounded, Bound::Unbounded, false).map(Result::unwrap).collect();
        prop_assert_eq!(all.len(), h.model.len());
    }
}
