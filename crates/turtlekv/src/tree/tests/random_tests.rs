//! Random batches of many shapes against the model, with `check()` after
//! every batch (`Harness::apply`). Values of most of a leaf are what make
//! leaves small beside neighbours they cannot join; the seeds here reach
//! three ways a cut or join could leave such a leaf beside one it could
//! join (`docs/testing.md`, "Known bugs fixed").

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use super::harness::{Harness, Rng, small_config};
use crate::tree::Tree;
use crate::tree::format::item_layout::ItemLayout;

/// How one seed's run is shaped.
struct Shape {
    node_size_bytes: u64,
    spill_after_new_pages: usize,
    key_kind: u64,
    key_space: u64,
    max_batch: u64,
    delete_percent: u64,
    huge_percent: u64,
}

impl Shape {
    fn for_seed(seed: u64) -> Shape {
        let mut r = Rng::new(seed ^ 0xab_cdef);
        let mut pick = |choices: &[u64]| choices[r.below(choices.len() as u64) as usize];
        Shape {
            node_size_bytes: pick(&[512, 512, 1024, 2048]),
            spill_after_new_pages: pick(&[2, 2, 3, 8]) as usize,
            key_kind: pick(&[0, 1, 2, 3, 4]),
            key_space: pick(&[50, 300, 3000, 30000]),
            max_batch: pick(&[20, 200, 1500]),
            delete_percent: pick(&[0, 20, 50, 90]),
            huge_percent: pick(&[0, 0, 2, 20]),
        }
    }
}

fn random_key(rng: &mut Rng, kind: u64, space: u64, max_key_bytes: usize) -> Bytes {
    match kind {
        0 => Bytes::from(format!("k{:07}", rng.below(space))),
        // Mostly a hot twentieth of the space.
        1 => {
            let hot = rng.below(10) < 8;
            let i = rng.below(if hot { space / 20 + 2 } else { space });
            Bytes::from(format!("k{i:07}"))
        }
        // Short keys of a tiny alphabet: prefixes of each other, 0x00, 0xff.
        2 => {
            let alphabet = [0u8, b'a', b'b', 0xff];
            let len = 1 + rng.below(10) as usize;
            Bytes::from_iter((0..len).map(|_| alphabet[rng.below(4) as usize]))
        }
        // A long shared prefix, tails of varying length.
        3 => {
            let mut k = vec![b'p'; 20 + rng.below(3) as usize];
            k.extend(rng.below(space).to_string().as_bytes());
            if rng.below(3) == 0 {
                k.push(0);
            }
            if rng.below(5) == 0 {
                k.push(0xff);
            }
            Bytes::from(k)
        }
        4 => Bytes::copy_from_slice(&rng.below(space).to_be_bytes()),
        _ => key_of_any_length(rng.below(space), max_key_bytes),
    }
}

/// Key `i` of a space whose keys take every length from 1 byte to
/// `max_key_bytes` (a key keeps its length, so batches overwrite and
/// delete live keys): short ones (prefixes of each other), ones just past
/// 8 bytes (`compare_keys` goes past the prefix it compares first), ones
/// about 64 bytes (a two-byte item tag), ones at the limit, and any length
/// between. Past 7 bytes, a run of one of two bytes comes before the
/// digits: keys of a run share long prefixes.
fn key_of_any_length(i: u64, max_key_bytes: usize) -> Bytes {
    let h = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
    let len = match h % 5 {
        0 => 1 + (h >> 8) % 8,
        1 => 9 + (h >> 8) % 8,
        2 => 56 + (h >> 8) % 16,
        3 => max_key_bytes - (h >> 8) % 3,
        _ => 1 + (h >> 8) % max_key_bytes,
    }
    .min(max_key_bytes);
    let digits = format!("{i:07}");
    if len <= digits.len() {
        return Bytes::copy_from_slice(&digits.as_bytes()[..len]);
    }
    let mut k = vec![if h & 64 == 0 { b'p' } else { 0xff }; len - digits.len()];
    k.extend_from_slice(digits.as_bytes());
    Bytes::from(k)
}

/// A value whose item takes most of a leaf: 75-100% of the largest item.
fn huge_value(rng: &mut Rng, key: &[u8], max_item_bytes: usize, fill: u8) -> Bytes {
    let room = max_item_bytes - ItemLayout::CURRENT.item_len(key.len(), Some(0));
    let mut len = room - rng.below(room as u64 / 4 + 1) as usize;
    while ItemLayout::CURRENT.item_len(key.len(), Some(len)) > max_item_bytes {
        len -= 1;
    }
    Bytes::from(vec![fill; len])
}

fn random_batch(
    h: &Harness,
    rng: &mut Rng,
    shape: &Shape,
    step: u64,
) -> BTreeMap<Bytes, Option<Bytes>> {
    let max_item_bytes = h.tree.config.max_item_bytes();
    let max_key_bytes = h.tree.config.max_key_bytes();
    let mut batch = BTreeMap::new();
    let max_batch = if rng.below(4) == 0 {
        1 + rng.below(8)
    } else {
        shape.max_batch
    };
    let n = 1 + rng.below(max_batch);
    match rng.below(10) {
        // Deletes of a stretch of live keys.
        0 if !h.model.is_empty() => {
            let start = rng.below(h.model.len() as u64) as usize;
            let len = 1 + rng.below(h.model.len() as u64 / 2 + 1) as usize;
            for k in h.model.keys().skip(start).take(len) {
                batch.insert(k.clone(), None);
            }
        }
        // An ascending run of keys.
        1 => {
            let base = rng.below(shape.key_space);
            let value = Bytes::from(vec![b'z'; (step % 30) as usize]);
            for i in 0..n {
                let k = format!("k{:07}", (base + i) % shape.key_space);
                batch.insert(Bytes::from(k), Some(value.clone()));
            }
        }
        _ => {
            for _ in 0..n {
                let k = random_key(rng, shape.key_kind, shape.key_space, max_key_bytes);
                let v = if rng.below(100) < shape.delete_percent {
                    None
                } else if rng.below(100) < shape.huge_percent {
                    Some(huge_value(rng, &k, max_item_bytes, (step % 251) as u8))
                } else {
                    let small = "v".repeat(rng.below(60) as usize);
                    Some(Bytes::from(format!("{step}:{small}")))
                };
                batch.insert(k, v);
            }
        }
    }
    batch
}

fn run(seed: u64, steps: u64) {
    run_shaped(seed, steps, Shape::for_seed(seed));
}

fn run_shaped(seed: u64, steps: u64, shape: Shape) {
    let mut config = small_config(shape.node_size_bytes);
    config.spill_after_new_pages = shape.spill_after_new_pages;
    let mut h = Harness::new(config);
    let mut rng = Rng::new(seed);
    for step in 0..steps {
        let batch = random_batch(&h, &mut rng, &shape, step);
        let touched: Vec<Bytes> = batch.keys().cloned().collect();
        h.apply(batch.into_iter().collect());
        for k in touched.iter().step_by(7) {
            let got = h.tree.get_bytes(h.root, k).unwrap();
            assert_eq!(got, h.model.get(k).cloned(), "seed {seed} step {step}");
        }
        if step % 3 == 0 {
            let scan = h
                .tree
                .scan(h.root, Bound::Unbounded, Bound::Unbounded, false);
            let all: Vec<(Bytes, Bytes)> = scan.map(Result::unwrap).collect();
            let want: Vec<(Bytes, Bytes)> = h.model.clone().into_iter().collect();
            assert!(all == want, "seed {seed} step {step}: scan differs");
        }
        // Now and then a cold tree, as after a reopen, with another spill
        // threshold.
        if rng.below(8) == 0 {
            h.io.drop_cache(false);
            config.spill_after_new_pages = 2 + rng.below(6) as usize;
            h.tree = Tree::new(h.io.clone(), config);
        }
    }
}

/// Each of three fixes in `reshape.rs` has a seed here that fails
/// `check()` without it: a node split left a small leaf last beside a left
/// neighbour it fits with (seed 24), a join made a small leaf's right
/// neighbour smaller without looking at that leaf again (57), and a join
/// beside the last leaf did not look at the last leaf (43).
#[test]
fn random_batches_leave_no_small_leaf_beside_one_it_could_join() {
    for seed in 0..64 {
        run(seed, 60);
    }
}

/// Keys of every length up to `MAX_KEY_SIZE` (`key_of_any_length`), with
/// deletes, in 4 KiB nodes (the default size, which takes the longest
/// keys): the other runs use keys of 8 bytes (`k%07d`, kinds 0 and 1, and
/// kind 4), of at most 10 (kind 2) or 20 to 30 (kind 3), so none reached
/// keys of 64 bytes and more or near the limit. Seeds 107 and 112 fail
/// `check()` (a non-root node under its minimum) unless node splits cut by
/// the halves' true sizes (`docs/testing.md`, "Known bugs fixed").
#[test]
fn random_batches_of_keys_of_every_length_match_the_model() {
    for seed in 105..113 {
        let mut shape = Shape::for_seed(seed);
        shape.node_size_bytes = 4096;
        shape.key_kind = 5;
        shape.delete_percent = shape.delete_percent.max(20);
        run_shaped(seed, 40, shape);
    }
}
