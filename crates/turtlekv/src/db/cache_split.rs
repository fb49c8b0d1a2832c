//! Splitting the memory budget between the record cache and the page cache
//! by what reads show (`Options::record_cache_auto_split`).
//!
//! Both caches keep a ghost list of what they evicted last, covering the
//! same number of bytes: one step of the split. A disk read of something
//! still in a ghost is a read that one more step of that cache would have
//! saved. Once a second, the checkpoint thread compares the two caches'
//! ghost recalls and moves one step of memory towards the one with clearly
//! more. Skewed point reads favour records (a hot record costs ~240 B, a
//! block ~4 KiB); scans and reads spread over many keys favour blocks.

use std::sync::atomic::Ordering;

use super::inner::DbInner;
use crate::stats::bump;

/// One step of the split, and the window of each ghost list: this fraction
/// of the memory budget.
pub(crate) const STEP_DIVISOR: u64 = 32;
/// Ghost recalls a window needs before it moves anything: fewer are noise.
const MIN_RECALLS: u64 = 32;

/// Ghost recalls of the two caches during one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recalls {
    pub record: u64,
    pub block: u64,
}

/// The record cache's next share, or `None` to keep `current`: a step
/// towards the cache whose ghost saw at least a quarter more recalls, within
/// `0..=max`.
pub(crate) fn next_share(current: u64, recalls: Recalls, step: u64, max: u64) -> Option<u64> {
    let Recalls { record, block } = recalls;
    if record + block < MIN_RECALLS {
        return None;
    }
    let next = if record > block + block / 4 {
        current.saturating_add(step).min(max)
    } else if block > record + record / 4 {
        current.saturating_sub(step)
    } else {
        current
    };
    (next != current).then_some(next)
}

impl DbInner {
    /// Bytes each ghost list covers: one step of the split.
    pub fn set_ghost_windows(&self) {
        let window = self.budget.total_bytes() / STEP_DIVISOR;
        self.record_cache.set_ghost_window_bytes(window);
        if let Some(target) = &self.target {
            target.set_cache_ghost_window_bytes(window);
        }
    }

    /// Gives the record cache the share asked for (capped), and the page
    /// cache the rest.
    pub fn apply_record_cache_share(&self) {
        let asked = self.record_cache_asked_bytes.load(Ordering::Relaxed);
        let share = crate::options::record_cache_share(asked, self.budget.total_bytes());
        self.record_cache.set_capacity(share);
        self.rebalance_memory(true);
    }

    /// One window's decision of the automatic split.
    pub fn split_caches(&self, recalls: Recalls) {
        if !self.record_cache_auto_split.load(Ordering::Relaxed) {
            return;
        }
        let budget = self.budget.total_bytes();
        let current = self.record_cache.capacity_bytes();
        let max = crate::options::record_cache_share(u64::MAX, budget);
        if let Some(share) = next_share(current, recalls, budget / STEP_DIVISOR, max) {
            self.record_cache_asked_bytes
                .store(share, Ordering::Relaxed);
            self.apply_record_cache_share();
            bump(&self.stats.record_cache_resizes, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recalls(record: u64, block: u64) -> Recalls {
        Recalls { record, block }
    }

    #[test]
    fn moves_one_step_towards_the_cache_that_would_have_saved_more() {
        assert_eq!(next_share(100, recalls(200, 100), 10, 500), Some(110));
        assert_eq!(next_share(100, recalls(100, 200), 10, 500), Some(90));
    }

    #[test]
    fn holds_on_a_near_tie_or_too_few_recalls() {
        assert_eq!(next_share(100, recalls(110, 100), 10, 500), None);
        assert_eq!(next_share(100, recalls(100, 110), 10, 500), None);
        assert_eq!(next_share(100, recalls(20, 0), 10, 500), None);
    }

    #[test]
    fn stays_within_zero_and_the_cap() {
        assert_eq!(next_share(495, recalls(1000, 0), 10, 500), Some(500));
        assert_eq!(next_share(500, recalls(1000, 0), 10, 500), None);
        assert_eq!(next_share(5, recalls(0, 1000), 10, 500), Some(0));
        assert_eq!(next_share(0, recalls(0, 1000), 10, 500), None);
    }
}
