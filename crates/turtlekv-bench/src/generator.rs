//! Request generators of the YCSB core workloads: zipfian (plain, scrambled
//! and "latest"), uniform, and the shared insert counter.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::keys::fnv_hash64;
use crate::rng::Rng;

/// YCSB's default skew.
pub const ZIPFIAN_THETA: f64 = 0.99;

/// The item count the scrambled zipfian draws ranks from before hashing
/// them onto the records, as YCSB does: popularity then does not depend on
/// how many records exist, and hot items are spread over the key space.
const SCRAMBLED_DOMAIN_ITEMS: u64 = 10_000_000_000;

/// Terms of the zeta sum computed exactly; past them an Euler-Maclaurin
/// tail is accurate to ~1e-12 relative, so the 1e10-item domain costs
/// microseconds instead of minutes.
const ZETA_EXACT_TERMS: u64 = 10_000;

/// `sum_{i=1..n} 1 / i^theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    let exact_terms = n.min(ZETA_EXACT_TERMS);
    let head: f64 = (1..=exact_terms).map(|i| (i as f64).powf(-theta)).sum();
    if n <= exact_terms {
        return head;
    }
    // sum_{i=a..=b} f(i) ~ integral_a^b f + (f(a) + f(b)) / 2
    //                      + (f'(b) - f'(a)) / 12, with f(x) = x^-theta.
    let a = (exact_terms + 1) as f64;
    let b = n as f64;
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
    head + integral + (f(a) + f(b)) / 2.0 + (df(b) - df(a)) / 12.0
}

/// Zipfian ranks in `[0, items)`: rank 0 most popular, by the method of
/// Gray et al., "Quickly generating billion-record synthetic databases",
/// which YCSB uses. The item count may grow (for "latest"); the zeta sum is
/// then extended by the new terms only.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_two: f64,
    zeta_items: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `items` (at least 1) with skew `theta` in (0, 1).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        assert!(items >= 1 && theta > 0.0 && theta < 1.0);
        let zeta_two = zeta(2, theta);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_two,
            zeta_items: zeta(items, theta),
            eta: 0.0,
        };
        z.eta = z.compute_eta();
        z
    }

    fn compute_eta(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta_two / self.zeta_items)
    }

    /// Grows (never shrinks) the item count to `items`.
    pub fn grow_to(&mut self, items: u64) {
        if items <= self.items {
            return;
        }
        self.zeta_items += ((self.items + 1)..=items)
            .map(|i| (i as f64).powf(-self.theta))
            .sum::<f64>();
        self.items = items;
        self.eta = self.compute_eta();
    }

    /// The current item count.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The next rank.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zeta_items;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.items - 1)
    }
}

/// How requests pick existing records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    /// Scrambled zipfian, theta 0.99 (YCSB's default).
    Zipfian,
    /// Every record equally likely.
    Uniform,
    /// Plain zipfian, theta 0.99, over the records themselves: record `n`
    /// has rank `n` (keys are hashes of record numbers, so the hot records
    /// are still spread over the key space). Unlike the scrambled default,
    /// whose 10^10-item domain leaves ~40% of requests on a near-uniform
    /// tail, nearly all requests fall on a small hot set.
    ZipfianUnscrambled,
}

/// Picks the record an operation touches.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// Scrambled zipfian over `items` records: a rank from the large fixed
    /// domain, hashed onto a record. Draws past the records inserted so far
    /// are redrawn.
    Scrambled { zipfian: Zipfian, items: u64 },
    /// Plain zipfian: the rank is the record number. Draws past the records
    /// inserted so far are redrawn.
    Unscrambled { zipfian: Zipfian },
    /// Uniform over the records inserted so far.
    Uniform,
    /// Recently inserted records most popular (workload D): the newest
    /// record minus a zipfian rank over the current record count.
    Latest { zipfian: Zipfian },
}

impl KeyChooser {
    /// A chooser for the request distribution of a workload. For "latest",
    /// `items` is the current record count (the domain grows with inserts);
    /// otherwise it is the record count plus the inserts the phase may make,
    /// onto which scrambled ranks are hashed.
    pub fn new(distribution: Distribution, latest: bool, items: u64) -> KeyChooser {
        if latest {
            return KeyChooser::Latest {
                zipfian: Zipfian::new(items.max(1), ZIPFIAN_THETA),
            };
        }
        match distribution {
            Distribution::Zipfian => KeyChooser::Scrambled {
                zipfian: Zipfian::new(SCRAMBLED_DOMAIN_ITEMS, ZIPFIAN_THETA),
                items: items.max(1),
            },
            Distribution::Uniform => KeyChooser::Uniform,
            Distribution::ZipfianUnscrambled => KeyChooser::Unscrambled {
                zipfian: Zipfian::new(items.max(1), ZIPFIAN_THETA),
            },
        }
    }

    /// A record number below `limit`, the records acknowledged so far
    /// (at least 1).
    pub fn next(&mut self, rng: &mut Rng, limit: u64) -> u64 {
        debug_assert!(limit >= 1);
        match self {
            KeyChooser::Scrambled { zipfian, items } => loop {
                let record = fnv_hash64(zipfian.next(rng)) % *items;
                if record < limit {
                    return record;
                }
            },
            KeyChooser::Unscrambled { zipfian } => loop {
                let record = zipfian.next(rng);
                if record < limit {
                    return record;
                }
            },
            KeyChooser::Uniform => rng.below(limit),
            KeyChooser::Latest { zipfian } => {
                zipfian.grow_to(limit);
                let rank = zipfian.next(rng) % limit;
                limit - 1 - rank
            }
        }
    }
}

/// Scan lengths: uniform in `1..=max_len`, as YCSB's default.
pub fn scan_len(rng: &mut Rng, max_len: u64) -> u64 {
    1 + rng.below(max_len)
}

/// Hands out record numbers to inserters and tracks which are done, so that
/// readers only pick records whose insert has completed (YCSB's
/// acknowledged counter).
#[derive(Debug)]
pub struct InsertCounter {
    next: AtomicU64,
    acknowledged: AtomicU64,
    /// Finished inserts above the acknowledged prefix.
    finished_early: Mutex<BTreeSet<u64>>,
}

impl InsertCounter {
    /// A counter whose records `0..start` already exist.
    pub fn new(start: u64) -> InsertCounter {
        InsertCounter {
            next: AtomicU64::new(start),
            acknowledged: AtomicU64::new(start),
            finished_early: Mutex::new(BTreeSet::new()),
        }
    }

    /// The next record number to insert.
    pub fn reserve(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `record`'s insert as complete.
    pub fn acknowledge(&self, record: u64) {
        let mut early = self.finished_early.lock().expect("counter lock poisoned");
        early.insert(record);
        let mut limit = self.acknowledged.load(Ordering::Acquire);
        while early.remove(&limit) {
            limit += 1;
        }
        self.acknowledged.store(limit, Ordering::Release);
    }

    /// Records `0..limit()` all exist.
    pub fn limit(&self) -> u64 {
        self.acknowledged.load(Ordering::Acquire)
    }

    /// Record numbers handed out so far (including unfinished inserts).
    pub fn reserved(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_tail_matches_the_exact_sum() {
        let n = 200_000;
        let exact: f64 = (1..=n).map(|i| (i as f64).powf(-ZIPFIAN_THETA)).sum();
        let approx = zeta(n, ZIPFIAN_THETA);
        assert!(
            ((approx - exact) / exact).abs() < 1e-10,
            "{approx} vs {exact}"
        );
        // YCSB's precomputed zeta for its 1e10-item scrambled domain.
        let big = zeta(SCRAMBLED_DOMAIN_ITEMS, ZIPFIAN_THETA);
        assert!((big - 26.469_028_201_783_02).abs() < 1e-6, "{big}");
    }

    #[test]
    fn zipfian_ranks_follow_the_power_law() {
        let items = 1000;
        let mut z = Zipfian::new(items, ZIPFIAN_THETA);
        let mut rng = Rng::new(5);
        let draws = 400_000;
        let mut counts = vec![0u64; items as usize];
        for _ in 0..draws {
            counts[z.next(&mut rng) as usize] += 1;
        }
        let zeta_n = zeta(items, ZIPFIAN_THETA);
        // P(rank r) = 1 / ((r + 1)^theta * zeta(n)) for the first ranks.
        for rank in [0usize, 1, 9] {
            let expected = 1.0 / ((rank as f64 + 1.0).powf(ZIPFIAN_THETA) * zeta_n);
            let seen = counts[rank] as f64 / draws as f64;
            assert!(
                (seen - expected).abs() < 0.15 * expected,
                "rank {rank}: {seen} vs {expected}"
            );
        }
        // Heavy head: the top 1% of items take far more than 1% of draws.
        let head: u64 = counts[..10].iter().sum();
        assert!(head as f64 / draws as f64 > 0.35);
    }

    #[test]
    fn scrambled_zipfian_is_skewed_but_spread_over_the_keys() {
        let records = 10_000;
        let mut chooser = KeyChooser::new(Distribution::Zipfian, false, records);
        let mut rng = Rng::new(11);
        let draws = 200_000;
        let mut counts = vec![0u64; records as usize];
        for _ in 0..draws {
            let r = chooser.next(&mut rng, records);
            counts[r as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top_1_percent: u64 = sorted[..100].iter().sum();
        assert!(
            top_1_percent as f64 / draws as f64 > 0.15,
            "{top_1_percent}"
        );
        // The hottest record is not simply record 0: ranks are hashed.
        let hottest = counts
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| **c)
            .map(|(i, _)| i);
        assert_ne!(hottest, Some(0));
        // Draws respect the limit of records inserted so far.
        for _ in 0..10_000 {
            assert!(chooser.next(&mut rng, 500) < 500);
        }
    }

    /// Share of `draws` requests that fall on the hottest 1% of `records`.
    fn top_percent_share(distribution: Distribution, records: u64, draws: u64) -> f64 {
        let mut chooser = KeyChooser::new(distribution, false, records);
        let mut rng = Rng::new(17);
        let mut counts = vec![0u64; records as usize];
        for _ in 0..draws {
            counts[chooser.next(&mut rng, records) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = counts[..(records / 100) as usize].iter().sum();
        top as f64 / draws as f64
    }

    #[test]
    fn unscrambled_zipfian_concentrates_on_fewer_records_than_scrambled() {
        let records = 100_000;
        let unscrambled = top_percent_share(Distribution::ZipfianUnscrambled, records, 400_000);
        let scrambled = top_percent_share(Distribution::Zipfian, records, 400_000);
        // Plain zipfian over 1e5 items: the top 1e3 take H(1e3)/H(1e5),
        // about 0.62; the scrambled one spreads its 1e10-item domain.
        assert!((0.55..0.70).contains(&unscrambled), "{unscrambled}");
        assert!(
            scrambled < unscrambled - 0.15,
            "{scrambled} vs {unscrambled}"
        );
        let mut chooser = KeyChooser::new(Distribution::ZipfianUnscrambled, false, records);
        let mut rng = Rng::new(4);
        for _ in 0..10_000 {
            assert!(chooser.next(&mut rng, 500) < 500);
        }
    }

    #[test]
    fn uniform_is_flat() {
        let mut chooser = KeyChooser::new(Distribution::Uniform, false, 100);
        let mut rng = Rng::new(2);
        let mut counts = [0u64; 100];
        for _ in 0..100_000 {
            counts[chooser.next(&mut rng, 100) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn latest_prefers_the_newest_records() {
        let mut chooser = KeyChooser::new(Distribution::Zipfian, true, 1000);
        let mut rng = Rng::new(3);
        let mut newest = 0;
        for _ in 0..10_000 {
            let r = chooser.next(&mut rng, 1000);
            assert!(r < 1000);
            if r >= 990 {
                newest += 1;
            }
        }
        assert!(newest > 3000, "{newest}");
        // As records are added, the hot spot moves with them.
        let r = (0..1000)
            .filter(|_| chooser.next(&mut rng, 5000) >= 4990)
            .count();
        assert!(r > 200, "{r}");
    }

    #[test]
    fn scan_lengths_are_uniform_in_1_to_100() {
        let mut rng = Rng::new(4);
        let mut seen = [0u64; 101];
        let draws = 100_000;
        for _ in 0..draws {
            let len = scan_len(&mut rng, 100);
            assert!((1..=100).contains(&len));
            seen[len as usize] += 1;
        }
        assert!(seen[1..].iter().all(|&c| c > 700 && c < 1300));
        let mean = (1..=100).map(|l| l as f64 * seen[l] as f64).sum::<f64>() / draws as f64;
        assert!((mean - 50.5).abs() < 1.0, "{mean}");
    }

    #[test]
    fn insert_counter_acknowledges_only_contiguous_prefixes() {
        let counter = InsertCounter::new(10);
        let a = counter.reserve();
        let b = counter.reserve();
        assert_eq!((a, b), (10, 11));
        counter.acknowledge(b);
        assert_eq!(counter.limit(), 10);
        counter.acknowledge(a);
        assert_eq!(counter.limit(), 12);
        assert_eq!(counter.reserved(), 12);
    }
}
