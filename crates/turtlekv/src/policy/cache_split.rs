//! Splitting the memory budget between the record cache and the page cache
//! by what reads show (`Options::record_cache_auto_split`).
//!
//! Both caches keep a ghost list of what they evicted last, covering the
//! same number of bytes: one step of the split. A disk read of something
//! still in a ghost is a read that one more step of that cache would have
//! saved. Once a second, the checkpoint thread compares the two caches'
//! ghost recalls; when the record cache's are clearly more, three seconds
//! in a row, one step of memory moves from the page cache to it (never
//! back: see `step_share`). Skewed point reads favour records (a hot record
//! costs ~240 B, a block ~4 KiB); scans and reads spread over many keys
//! favour blocks, and then nothing moves.

use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use super::{MemoryPolicy, record_cache_share};
use crate::record_cache::RecordCache;
use crate::stats::{Counters, bump};
use crate::store::VersionSet;

/// One step of the split, and the window of each ghost list: this fraction
/// of the memory budget.
pub(crate) const STEP_DIVISOR: u64 = 32;
/// Ghost recalls a window needs before it votes: fewer are noise.
const MIN_RECALLS: u64 = 32;
/// Windows in a row that must vote the same way before memory moves: each
/// move evicts from one cache, so flapping between near-equal signals costs
/// more than it can gain.
const VOTES_TO_MOVE: u32 = 3;

/// Ghost recalls of the two caches during one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recalls {
    pub record: u64,
    pub block: u64,
}

/// Which way one window says memory should go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vote {
    Records,
    Blocks,
}

/// A window votes for the cache whose ghost saw at least half again as
/// many recalls as the other's; a near tie or too few recalls abstain.
pub(crate) fn vote(recalls: Recalls) -> Option<Vote> {
    let Recalls { record, block } = recalls;
    if record + block < MIN_RECALLS {
        None
    } else if record > block + block / 2 {
        Some(Vote::Records)
    } else if block > record + record / 2 {
        Some(Vote::Blocks)
    } else {
        None
    }
}

/// Consecutive votes the same way.
#[derive(Debug, Default)]
pub(crate) struct Streak {
    last: Option<Vote>,
    count: u32,
}

impl Streak {
    /// Adds a window's vote; returns the direction once `VOTES_TO_MOVE`
    /// windows in a row agree (and starts counting again).
    pub fn add(&mut self, vote: Option<Vote>) -> Option<Vote> {
        if vote.is_none() || vote != self.last {
            self.count = 0;
        }
        self.last = vote;
        self.count += u32::from(vote.is_some());
        if self.count < VOTES_TO_MOVE {
            return None;
        }
        self.count = 0;
        vote
    }
}

/// The record cache's share after a decided vote: one step more, up to
/// `max`, for records; unchanged for blocks. The split never shrinks the
/// record cache: a step taken from it evicts ~58K records per 14 MiB, hot
/// ones among them, and each hot record whose block is no longer cached
/// costs a disk read to get back, where a step taken from the page cache
/// costs at most one read per 4 KiB block. Measured on 10M-record YCSB runs,
/// shrinking steps raised disk reads per get by 40-50% during the phase
/// (`docs/benchmark-log.md`). Only the user shrinks it.
pub(crate) fn step_share(current: u64, vote: Vote, step: u64, max: u64) -> u64 {
    match vote {
        Vote::Records => current.saturating_add(step).min(max).max(current),
        Vote::Blocks => current,
    }
}

impl MemoryPolicy {
    /// Bytes each ghost list covers: one step of the split.
    pub fn set_ghost_windows(&self, versions: &VersionSet, record_cache: &RecordCache) {
        let window = self.budget.total_bytes() / STEP_DIVISOR;
        record_cache.set_ghost_window_bytes(window);
        if let Some(trees) = versions.trees() {
            trees.set_cache_ghost_window_bytes(window);
        }
    }

    /// Gives the record cache the share asked for (capped), and the page
    /// cache the rest. The cache that shrinks goes first, so that the two
    /// never hold more than the budget together; no other resize runs in
    /// between, so none sees the record cache's old size and undoes the
    /// page cache's step.
    pub fn apply_record_cache_share(&self, versions: &VersionSet, record_cache: &RecordCache) {
        let mut resizing = self.budget.lock_resizes();
        let asked = self.record_cache_asked_bytes.load(Ordering::Relaxed);
        let share = record_cache_share(asked, self.budget.total_bytes());
        if share <= record_cache.capacity_bytes() {
            record_cache.set_capacity(share);
            self.resize_page_cache_locked(&mut resizing, versions, share);
        } else {
            self.resize_page_cache_locked(&mut resizing, versions, share);
            record_cache.set_capacity(share);
        }
    }

    /// Gives the page cache what the MemTables and a record cache of
    /// `record_cache_bytes` leave, under a guard from `lock_resizes`.
    fn resize_page_cache_locked(
        &self,
        resizing: &mut MutexGuard<'_, u64>,
        versions: &VersionSet,
        record_cache_bytes: u64,
    ) {
        if let Some(trees) = versions.trees() {
            let in_use = versions.memtable_bytes() + record_cache_bytes;
            self.budget.resize_locked(resizing, in_use, &**trees, true);
        }
    }

    /// One window's decision of the automatic split.
    pub fn split_caches(
        &self,
        recalls: Recalls,
        versions: &VersionSet,
        record_cache: &RecordCache,
        stats: &Counters,
    ) {
        // Held to the end, so a user's setting made meanwhile
        // (`Db::set_record_cache_capacity`) is not overwritten by a step
        // decided before it.
        let mut streak = self.split_streak.lock();
        if !self.record_cache_auto_split.load(Ordering::Relaxed) {
            return;
        }
        let Some(direction) = streak.add(vote(recalls)) else {
            return;
        };
        let budget = self.budget.total_bytes();
        let current = record_cache.capacity_bytes();
        let max = record_cache_share(u64::MAX, budget);
        let share = step_share(current, direction, budget / STEP_DIVISOR, max);
        if share != current {
            // Counted first: `stats()` must not show a resize's capacity
            // without its count (a test waiting for two steps once saw the
            // second step's capacity, one resize, and the page cache not
            // yet shrunk).
            bump(&stats.record_cache_resizes, 1);
            self.record_cache_asked_bytes
                .store(share, Ordering::Relaxed);
            self.apply_record_cache_share(versions, record_cache);
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
    fn votes_for_the_cache_that_would_have_saved_clearly_more() {
        assert_eq!(vote(recalls(200, 100)), Some(Vote::Records));
        assert_eq!(vote(recalls(100, 200)), Some(Vote::Blocks));
        assert_eq!(vote(recalls(140, 100)), None, "near tie");
        assert_eq!(vote(recalls(100, 140)), None, "near tie");
        assert_eq!(vote(recalls(20, 0)), None, "too few recalls");
    }

    #[test]
    fn moves_only_after_agreeing_votes_in_a_row() {
        let mut streak = Streak::default();
        let r = Some(Vote::Records);
        let b = Some(Vote::Blocks);
        assert_eq!(streak.add(r), None);
        assert_eq!(streak.add(r), None);
        assert_eq!(streak.add(b), None, "a change of mind restarts the count");
        assert_eq!(streak.add(b), None);
        assert_eq!(streak.add(None), None, "an abstention restarts it too");
        assert_eq!(streak.add(b), None);
        assert_eq!(streak.add(b), None);
        assert_eq!(streak.add(b), b);
        assert_eq!(streak.add(b), None, "and counting starts again");
    }

    #[test]
    fn steps_only_grow_and_stop_at_the_cap() {
        assert_eq!(step_share(100, Vote::Records, 10, 500), 110);
        assert_eq!(step_share(495, Vote::Records, 10, 500), 500);
        assert_eq!(step_share(100, Vote::Blocks, 10, 500), 100, "never shrinks");
        assert_eq!(
            step_share(600, Vote::Records, 10, 500),
            600,
            "nor by the cap"
        );
    }
}
