//! Committed generations, the readers pinning them, and the pages waiting
//! for those readers before their slots may be reused.
//!
//! Commit `g` makes some pages unreachable from the new root; readers pinned
//! at generation `< g` may still reach them. They become reusable once no
//! pin older than `g` remains. Pinning and publishing share one mutex, so a
//! reader can never pin a generation whose freed pages were already handed
//! out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{PageId, PageRange};

#[derive(Debug)]
struct Inner {
    generation: u64,
    root: Option<PageId>,
    /// Generation -> number of live pins.
    pins: BTreeMap<u64, usize>,
    /// Pages made unreachable by commit `g`, and content ranges of pages
    /// it still reaches that no reader of it reads, oldest commit first.
    pending: VecDeque<(u64, Retired)>,
}

/// What a commit leaves to no reader of its root.
#[derive(Debug, Default)]
pub(crate) struct Retired {
    /// Pages unreachable from the root.
    pub pages: Vec<PageId>,
    /// Content ranges of pages still reachable that no reader of the root
    /// reads (a segment's flushed chunks): their blocks may be punched.
    pub dead_ranges: Vec<PageRange>,
}

impl Retired {
    fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.dead_ranges.is_empty()
    }
}

/// The shared table of generations and pins.
#[derive(Debug)]
pub(crate) struct Versions {
    inner: Mutex<Inner>,
}

/// A reader's hold on one committed root: while it lives, no page reachable
/// from that root is reused. Cloning pins again; dropping unpins.
#[derive(Debug)]
pub(crate) struct RootPin {
    versions: Arc<Versions>,
    generation: u64,
    root: Option<PageId>,
}

impl Versions {
    /// The table after opening at `generation`.
    pub fn new(generation: u64, root: Option<PageId>) -> Arc<Versions> {
        Arc::new(Versions {
            inner: Mutex::new(Inner {
                generation,
                root,
                pins: BTreeMap::new(),
                pending: VecDeque::new(),
            }),
        })
    }

    /// Pins the newest committed root.
    pub fn pin(self: &Arc<Self>) -> RootPin {
        let mut inner = self.inner.lock();
        let generation = inner.generation;
        *inner.pins.entry(generation).or_insert(0) += 1;
        RootPin {
            versions: self.clone(),
            generation,
            root: inner.root,
        }
    }

    /// The newest committed generation and its root.
    pub fn current(&self) -> (u64, Option<PageId>) {
        let inner = self.inner.lock();
        (inner.generation, inner.root)
    }

    /// Records durable commit `generation`, which left `retired` to no
    /// reader of its root.
    pub fn publish(&self, generation: u64, root: Option<PageId>, retired: Retired) {
        let mut inner = self.inner.lock();
        debug_assert_eq!(generation, inner.generation + 1);
        inner.generation = generation;
        inner.root = root;
        if !retired.is_empty() {
            inner.pending.push_back((generation, retired));
        }
    }

    /// Takes the pages and ranges no pinned reader can read any more.
    pub fn take_reusable(&self) -> Retired {
        let mut inner = self.inner.lock();
        let oldest_pin = inner.pins.keys().next().copied().unwrap_or(u64::MAX);
        let mut out = Retired::default();
        while inner
            .pending
            .front()
            .is_some_and(|(freed_at, _)| *freed_at <= oldest_pin)
        {
            let (_, retired) = inner.pending.pop_front().expect("front exists");
            out.pages.extend(retired.pages);
            out.dead_ranges.extend(retired.dead_ranges);
        }
        out
    }

    /// `true` when some pages wait for pins or a reclaim.
    pub fn has_pending(&self) -> bool {
        !self.inner.lock().pending.is_empty()
    }

    /// Pages waiting, and pinned readers.
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        let pages = inner
            .pending
            .iter()
            .map(|(_, r)| r.pages.len() as u64)
            .sum();
        let pins = inner.pins.values().map(|&n| n as u64).sum();
        (pages, pins)
    }

    /// Every page waiting to be reused (for deep checks).
    pub fn pending_pages(&self) -> Vec<PageId> {
        let inner = self.inner.lock();
        inner
            .pending
            .iter()
            .flat_map(|(_, r)| r.pages.iter().copied())
            .collect()
    }
}

impl RootPin {
    /// The pinned generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The pinned root; `None` for an empty tree.
    pub fn root(&self) -> Option<PageId> {
        self.root
    }
}

impl Clone for RootPin {
    fn clone(&self) -> Self {
        let mut inner = self.versions.inner.lock();
        *inner.pins.get_mut(&self.generation).expect("pinned") += 1;
        RootPin {
            versions: self.versions.clone(),
            generation: self.generation,
            root: self.root,
        }
    }
}

impl Drop for RootPin {
    fn drop(&mut self) {
        let mut inner = self.versions.inner.lock();
        let count = inner.pins.get_mut(&self.generation).expect("pinned");
        *count -= 1;
        if *count == 0 {
            inner.pins.remove(&self.generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retired(pages: Vec<PageId>) -> Retired {
        Retired {
            pages,
            dead_ranges: Vec::new(),
        }
    }

    fn page(n: u64) -> PageId {
        PageId::from_raw(n)
    }

    #[test]
    fn freed_pages_wait_for_older_pins() {
        let v = Versions::new(0, None);
        let old = v.pin();
        let also_old = old.clone();
        v.publish(1, None, retired(vec![page(1)]));
        let newer = v.pin();
        assert_eq!(newer.generation(), 1);
        v.publish(2, None, retired(vec![page(2)]));
        assert!(v.take_reusable().pages.is_empty());
        drop(old);
        assert!(
            v.take_reusable().pages.is_empty(),
            "a clone still pins generation 0"
        );
        drop(also_old);
        assert_eq!(v.take_reusable().pages, vec![page(1)]);
        assert_eq!(v.counts(), (1, 1));
        drop(newer);
        assert_eq!(v.take_reusable().pages, vec![page(2)]);
        assert!(!v.has_pending());
    }

    #[test]
    fn a_pin_of_the_newest_generation_does_not_hold_older_frees() {
        let v = Versions::new(5, None);
        v.publish(6, None, retired(vec![page(9)]));
        let pin = v.pin();
        assert_eq!(v.take_reusable().pages, vec![page(9)]);
        assert_eq!(pin.generation(), 6);
    }
}
