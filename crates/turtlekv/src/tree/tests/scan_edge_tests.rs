//! Scans over keys whose 8-byte prefixes tie, with bounds on and around the
//! windows' edges: the cases where a scan compares prefixes first and keys
//! only on ties (`WindowRange`, `LeafHead::chunks_for`), and where a window
//! ends and the next begins. Each scan, both ways, must give the model's
//! range. The keys vary in length (1 to 18 bytes): fixed-length keys miss
//! these cases.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use bytes::Bytes;

use super::harness::{Harness, Rng, small_config};

/// Keys of 1-10 bytes over a small alphabet with zeros and 0xff, half of
/// them behind a shared 8-byte prefix.
fn tie_key(rng: &mut Rng) -> Bytes {
    const ALPHABET: [u8; 5] = [0, 1, b'a', b'b', 0xff];
    let mut key = if rng.below(2) == 0 {
        b"samepref".to_vec()
    } else {
        Vec::new()
    };
    let len = 1 + rng.below(10) as usize;
    key.extend((0..len).map(|_| ALPHABET[rng.below(5) as usize]));
    Bytes::from(key)
}

/// A tree of 25 batches of such keys (a fifth of them deletes).
fn tie_tree(seed: u64) -> Harness {
    let mut rng = Rng::new(seed);
    let mut h = Harness::new(small_config(512));
    for _ in 0..25 {
        let batch: BTreeMap<Bytes, Option<Bytes>> = (0..80)
            .map(|_| {
                let value = (rng.below(5) > 0).then(|| Bytes::from(vec![3u8; 20]));
                (tie_key(&mut rng), value)
            })
            .collect();
        h.apply(batch.into_iter().collect());
    }
    assert!(h.max_height >= 2, "height {}", h.max_height);
    h
}

/// The scan of `(lo, hi)`, forward and in reverse, against the model.
fn assert_scans_match(h: &Harness, lo: &Bound<Bytes>, hi: &Bound<Bytes>) {
    let want: Vec<(Bytes, Bytes)> = h
        .model
        .range((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for reverse in [false, true] {
        let mut got: Vec<(Bytes, Bytes)> = h
            .tree
            .scan(h.root, lo.clone(), hi.clone(), reverse)
            .map(Result::unwrap)
            .collect();
        if reverse {
            got.reverse();
        }
        assert_eq!(got, want, "{lo:?}..{hi:?}, reverse {reverse}");
    }
}

/// `lo < hi` where both are bounded (`BTreeMap::range` panics otherwise).
fn ordered(lo: &Bound<Bytes>, hi: &Bound<Bytes>) -> bool {
    match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

#[test]
fn scans_over_keys_with_tied_prefixes_match_the_model() {
    for seed in 0..6 {
        let h = tie_tree(1000 + seed);
        let keys: Vec<Bytes> = h.model.keys().cloned().collect();
        let mut rng = Rng::new(seed);
        let pick = |rng: &mut Rng| {
            let key = if rng.below(3) == 0 {
                tie_key(rng)
            } else {
                keys[rng.below(keys.len() as u64) as usize].clone()
            };
            match rng.below(4) {
                0 => key.slice(..key.len() - 1),
                1 => Bytes::from([key.as_ref(), b"\0"].concat()),
                _ => key,
            }
        };
        for _ in 0..400 {
            let bound = |rng: &mut Rng| match rng.below(3) {
                0 => Bound::Included(pick(rng)),
                1 => Bound::Excluded(pick(rng)),
                _ => Bound::Unbounded,
            };
            let (lo, hi) = (bound(&mut rng), bound(&mut rng));
            if ordered(&lo, &hi) {
                assert_scans_match(&h, &lo, &hi);
            }
        }
    }
}

#[test]
fn scans_bounded_at_window_edges_match_the_model() {
    for seed in 0..4 {
        let h = tie_tree(2000 + seed);
        // Every window's edges, as a full scan meets them.
        let mut edges = BTreeSet::new();
        let mut cursor = h
            .tree
            .scan(h.root, Bound::Unbounded, Bound::Unbounded, false);
        while let Some(item) = cursor.next() {
            item.unwrap();
            edges.insert(cursor.window.lo().to_vec());
            if let Some(hi) = cursor.window.hi() {
                edges.insert(hi.to_vec());
            }
        }
        assert!(edges.len() > 5, "only {} window edges", edges.len());
        for edge in &edges {
            let edge = Bytes::from(edge.clone());
            let mut near = vec![edge.clone(), Bytes::from([edge.as_ref(), b"\0"].concat())];
            if !edge.is_empty() {
                near.push(edge.slice(..edge.len() - 1));
            }
            for key in near {
                let bounds = [
                    Bound::Included(key.clone()),
                    Bound::Excluded(key.clone()),
                    Bound::Unbounded,
                ];
                for lo in &bounds {
                    for hi in &bounds {
                        // One key bounds one side only, or both inclusively.
                        let one_sided =
                            matches!(lo, Bound::Unbounded) || matches!(hi, Bound::Unbounded);
                        let both_included =
                            matches!((lo, hi), (Bound::Included(_), Bound::Included(_)));
                        if one_sided || both_included {
                            assert_scans_match(&h, lo, hi);
                        }
                    }
                }
            }
        }
        // Whole windows, between neighbouring edges.
        let edges: Vec<Bytes> = edges.into_iter().map(Bytes::from).collect();
        for pair in edges.windows(2) {
            let (a, b) = (pair[0].clone(), pair[1].clone());
            assert_scans_match(&h, &Bound::Included(a.clone()), &Bound::Excluded(b.clone()));
            assert_scans_match(&h, &Bound::Excluded(a), &Bound::Included(b));
        }
    }
}
