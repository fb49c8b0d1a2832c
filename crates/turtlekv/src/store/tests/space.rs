//! Disk usage on the real file system under a steady random-update load:
//! the allocator's space amplification (allocated bytes over live page
//! bytes) must stay under 1.3.

use std::path::Path;
use std::sync::Arc;

use super::harness::{Version, list_children, open_in, record};
use crate::io::{FileSystem, OpenOptions, RealFs};
use crate::page::PAGE_FILE_NAMES;
use crate::page::{PageIo, PageKind, PageStoreOptions};
use crate::store::superblock::SUPERBLOCK_FILE_NAME;

const LEAVES: usize = 48;
const CHECKPOINTS: u64 = 60;
const REWRITES_PER_CHECKPOINT: usize = 6;

struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

fn allocated_bytes(fs: &dyn FileSystem, dir: &Path) -> u64 {
    PAGE_FILE_NAMES
        .iter()
        .chain([&SUPERBLOCK_FILE_NAME])
        .map(|name| {
            let f = fs.open(&dir.join(name), OpenOptions::read_only()).unwrap();
            f.allocated_bytes().unwrap()
        })
        .sum()
}

/// 256 KiB leaves on a real file system; written leaves are not cached,
/// so reads and punches meet the files.
fn uncached_256k_leaf_options() -> PageStoreOptions {
    PageStoreOptions {
        node_size_bytes: 4096,
        leaf_size_bytes: 256 * 1024,
        cache_capacity_bytes: 1 << 20,
        direct_io: false,
        cache_written_leaves: false,
    }
}

#[test]
fn space_amplification_stays_under_1_3_on_steady_random_updates() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let options = uncached_256k_leaf_options();
    let (store, _) = open_in(&fs, dir.path(), &options, true).unwrap();
    let max_leaf = store.max_page_bytes(PageKind::Leaf);
    let min_leaf = options.leaf_size_bytes as usize / 4;
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    // Leaves stay between a quarter and all of a leaf, as the tree keeps them.
    let size = |rng: &mut XorShift, seed: u64| (seed, min_leaf + rng.below(max_leaf - min_leaf));
    let leaves = (0..LEAVES as u64)
        .map(|s| {
            let (seed, len) = size(&mut rng, s);
            Version::new_leaf(&store, seed, len).unwrap()
        })
        .collect();
    let mut v = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v.root), 0), &[]).unwrap();
    let (mut worst, mut sum, mut samples) = (0f64, 0f64, 0u32);
    for n in 1..=CHECKPOINTS {
        // Every tenth checkpoint, a reader keeps the previous root pinned
        // across the commit, so its pages cannot be reused yet.
        let reader = (n % 10 == 0).then(|| store.pin());
        let mut leaves = v.leaves.clone();
        let mut freed = vec![v.root];
        for k in 0..REWRITES_PER_CHECKPOINT {
            let i = rng.below(LEAVES);
            freed.push(leaves[i].0);
            let (seed, len) = size(&mut rng, n * 100 + k as u64);
            leaves[i] = Version::new_leaf(&store, seed, len).unwrap();
            // A leaf rewritten twice in one checkpoint: its first copy was
            // never reachable from any root, and goes back too.
        }
        freed.sort();
        freed.dedup();
        freed.retain(|id| !leaves.iter().any(|l| l.0 == *id));
        let next_v = Version::write(&store, leaves).unwrap();
        store.commit(record(Some(next_v.root), n), &freed).unwrap();
        v = next_v;
        store.reclaim().unwrap();
        let live: u64 = v.leaves.iter().map(|l| l.2 as u64).sum::<u64>() + 8 * LEAVES as u64;
        let amplification = allocated_bytes(&*fs, dir.path()) as f64 / live as f64;
        if n > 5 {
            worst = worst.max(amplification);
            sum += amplification;
            samples += 1;
        }
        drop(reader);
    }
    store.reclaim().unwrap();
    let stats = store.stats();
    eprintln!(
        "space amplification over {samples} checkpoints: mean {:.3}, worst {worst:.3} \
         (reader pinned every tenth); {} bytes punched",
        sum / f64::from(samples),
        stats.bytes_punched
    );
    assert!(worst < 1.3, "worst space amplification {worst:.3}");
    assert_eq!(stats.live_leaf_pages, LEAVES as u64);
    store.check(&store.pin(), &list_children).unwrap();
}

/// Freed leaf slots keep their bytes until the next commit. That commit
/// punches every freed slot no write reused, and the tail past its page of
/// every slot a write did reuse, and no byte of a live page.
#[test]
fn freed_slots_are_punched_at_the_next_commit_unless_reused() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let options = uncached_256k_leaf_options();
    let (store, _) = open_in(&fs, dir.path(), &options, true).unwrap();
    let full = store.max_page_bytes(PageKind::Leaf);
    let leaves = (0..4)
        .map(|s| Version::new_leaf(&store, s, full).unwrap())
        .collect();
    let v1 = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v1.root), 1), &[]).unwrap();
    // Replace leaves 0 and 1; once reclaimed their slots are free but not
    // yet punched.
    let mut leaves = v1.leaves.clone();
    leaves[0] = Version::new_leaf(&store, 10, full).unwrap();
    leaves[1] = Version::new_leaf(&store, 11, full).unwrap();
    let v2 = Version::write(&store, leaves.clone()).unwrap();
    let dead = [v1.root, v1.leaves[0].0, v1.leaves[1].0];
    store.commit(record(Some(v2.root), 2), &dead).unwrap();
    store.reclaim().unwrap();
    let with_dirty_slots = allocated_bytes(&*fs, dir.path());
    assert_eq!(store.stats().bytes_punched, 0);
    // One block of a page reuses the lowest dirty slot; the next commit
    // punches that slot's tail and the other dirty slot whole.
    leaves[2] = Version::new_leaf(&store, 12, 1000).unwrap();
    assert_eq!(leaves[2].0.slot(), v1.leaves[0].0.slot());
    let v3 = Version::write(&store, leaves).unwrap();
    store
        .commit(record(Some(v3.root), 3), &[v2.root, v1.leaves[2].0])
        .unwrap();
    let slot_bytes = 256 * 1024;
    let block_bytes = 4096;
    assert_eq!(
        store.stats().bytes_punched,
        (slot_bytes - block_bytes) + slot_bytes
    );
    let after = allocated_bytes(&*fs, dir.path());
    assert!(
        after + slot_bytes <= with_dirty_slots,
        "allocated {after} B after the commit, {with_dirty_slots} B before"
    );
    for &(id, seed, len) in &v3.leaves {
        let got = store.read_page_uncached(id).unwrap();
        assert_eq!(got, super::harness::leaf_bytes(seed, len));
    }
    store.check(&store.pin(), &list_children).unwrap();
}

/// `punch_surplus` punches at once the freed slots beyond the lowest ones
/// the next writes will take, and leaves those for the commit.
#[test]
fn surplus_freed_slots_are_punched_before_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    let options = uncached_256k_leaf_options();
    let (store, _) = open_in(&fs, dir.path(), &options, true).unwrap();
    let full = store.max_page_bytes(PageKind::Leaf);
    let leaves = (0..4)
        .map(|s| Version::new_leaf(&store, s, full).unwrap())
        .collect();
    let v1 = Version::write(&store, leaves).unwrap();
    store.commit(record(Some(v1.root), 1), &[]).unwrap();
    let mut leaves = v1.leaves.clone();
    leaves[0] = Version::new_leaf(&store, 10, full).unwrap();
    leaves[1] = Version::new_leaf(&store, 11, full).unwrap();
    let v2 = Version::write(&store, leaves).unwrap();
    let dead = [v1.root, v1.leaves[0].0, v1.leaves[1].0];
    store.commit(record(Some(v2.root), 2), &dead).unwrap();
    let before = allocated_bytes(&*fs, dir.path());
    // Keep one slot's worth: the lower freed slot stays for the next write.
    let slot_bytes = 256 * 1024;
    store.punch_surplus(slot_bytes).unwrap();
    assert_eq!(store.stats().bytes_punched, slot_bytes);
    let after = allocated_bytes(&*fs, dir.path());
    assert!(after + slot_bytes <= before, "{before} -> {after}");
    // The next write takes the kept slot; nothing is punched twice.
    let reused = Version::new_leaf(&store, 12, full).unwrap();
    assert_eq!(reused.0.slot(), v1.leaves[0].0.slot());
    store.punch_surplus(0).unwrap();
    assert_eq!(store.stats().bytes_punched, slot_bytes);
    for &(id, seed, len) in &v2.leaves {
        let got = store.read_page_uncached(id).unwrap();
        assert_eq!(got, super::harness::leaf_bytes(seed, len));
    }
}
