//! Publishing writes in sequence order. Groups are logged one at a time
//! but applied to the MemTable concurrently (`write.rs`), so they can finish
//! applying out of order. A group's writes become visible only once every
//! group logged before it is applied too: a reader at sequence number `s`
//! must find every write numbered `s` or less in the MemTables.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

#[derive(Debug)]
pub(crate) struct Visibility {
    /// Highest sequence number whose writes, and all before them, are in
    /// the MemTables.
    visible_seq: AtomicU64,
    /// Applied groups waiting for an earlier one: first → last sequence number.
    applied_ahead: Mutex<BTreeMap<u64, u64>>,
    advanced: Condvar,
}

impl Visibility {
    pub fn new(visible_seq: u64) -> Self {
        Visibility {
            visible_seq: AtomicU64::new(visible_seq),
            applied_ahead: Mutex::new(BTreeMap::new()),
            advanced: Condvar::new(),
        }
    }

    pub fn visible_seq(&self) -> u64 {
        self.visible_seq.load(Ordering::Acquire)
    }

    /// Records that the writes numbered `first..=last` are applied, and
    /// returns once they are visible: at once if every earlier group is
    /// applied, else when the last of them is.
    pub fn publish(&self, first: u64, last: u64) {
        debug_assert!(first <= last, "an empty group has nothing to publish");
        let mut ahead = self.applied_ahead.lock();
        let before = self.visible_seq.load(Ordering::Relaxed);
        debug_assert!(first > before, "sequence numbers are published once");
        ahead.insert(first, last);
        let mut visible = before;
        while let Some(entry) = ahead.first_entry().filter(|e| *e.key() == visible + 1) {
            visible = entry.remove();
        }
        if visible != before {
            self.visible_seq.store(visible, Ordering::Release);
            self.advanced.notify_all();
        }
        while self.visible_seq.load(Ordering::Relaxed) < last {
            self.advanced.wait(&mut ahead);
        }
    }

    /// Returns once every write numbered `seq` or less is visible. The
    /// caller must know that those writes are logged and being applied.
    pub fn wait_for(&self, seq: u64) {
        if self.visible_seq() >= seq {
            return;
        }
        let mut ahead = self.applied_ahead.lock();
        while self.visible_seq.load(Ordering::Relaxed) < seq {
            self.advanced.wait(&mut ahead);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_group_applied_first_waits_for_the_groups_before_it() {
        let v = Arc::new(Visibility::new(10));
        let later = {
            let v = v.clone();
            std::thread::spawn(move || v.publish(14, 20))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(v.visible_seq(), 10, "11..=13 are not applied yet");
        assert!(!later.is_finished());
        v.publish(11, 13);
        later.join().unwrap();
        assert_eq!(v.visible_seq(), 20);
        v.wait_for(20);
    }

    #[test]
    fn groups_in_order_become_visible_at_once() {
        let v = Visibility::new(0);
        for first in (1..100).step_by(3) {
            v.publish(first, first + 2);
            assert_eq!(v.visible_seq(), first + 2);
        }
        v.wait_for(5);
    }

    #[test]
    fn concurrent_publishers_end_with_everything_visible() {
        let v = Arc::new(Visibility::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let v = v.clone();
                // Thread t publishes every fourth single-write group.
                std::thread::spawn(move || {
                    for i in 0..500u64 {
                        let seq = i * 4 + t + 1;
                        v.publish(seq, seq);
                        assert!(v.visible_seq() >= seq);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(v.visible_seq(), 2000);
    }
}
