//! Counters that every reader bumps on a hot path (page cache hits, several
//! per get), striped over cache lines: two cores counting into one shared
//! line would pass it back and forth on every bump. Each thread keeps to
//! one stripe; reading a counter sums the stripes. Shared by the page layer
//! and the database, like `key.rs`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Stripes per counter: enough for the client threads of a small machine
/// to count apart; more threads share stripes, which stays correct.
const STRIPES: usize = 8;

/// One stripe alone on its cache lines (128 bytes: adjacent-line
/// prefetchers fetch lines in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

/// A monotonic event counter, cheap to bump from many threads at once.
#[derive(Debug, Default)]
pub(crate) struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

impl StripedCounter {
    #[inline]
    pub(crate) fn add(&self, by: u64) {
        self.stripes[thread_stripe()].0.fetch_add(by, Relaxed);
    }

    /// The total so far (a sum of stripes read one after another, exact
    /// once the counting threads are quiet).
    pub(crate) fn load(&self) -> u64 {
        self.stripes.iter().map(|s| s.0.load(Relaxed)).sum()
    }
}

/// The calling thread's stripe, dealt round-robin as threads first count.
fn thread_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counter = StripedCounter::default();
        std::thread::scope(|s| {
            for t in 0..(2 * STRIPES as u64 + 3) {
                let counter = &counter;
                s.spawn(move || {
                    for _ in 0..1_000 {
                        counter.add(t + 1);
                    }
                });
            }
        });
        let threads = 2 * STRIPES as u64 + 3;
        assert_eq!(counter.load(), 1_000 * threads * (threads + 1) / 2);
    }

    #[test]
    fn stripes_sit_on_lines_of_their_own() {
        assert_eq!(std::mem::align_of::<Stripe>(), 128);
        assert_eq!(std::mem::size_of::<StripedCounter>(), 128 * STRIPES);
    }
}
