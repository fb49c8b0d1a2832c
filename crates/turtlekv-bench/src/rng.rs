//! A small deterministic random number generator.
//!
//! The benchmark must be reproducible from `--seed` alone, across platforms
//! and dependency upgrades, so it carries its own generator (SplitMix64)
//! instead of relying on a crate whose streams may change between versions.

/// SplitMix64: one 64-bit state word, passes BigCrush, a few cycles per draw.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl Rng {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A generator for one sub-stream (a thread of a phase, say), so that
    /// streams derived from one seed do not overlap in practice.
    pub fn derive(seed: u64, stream: u64) -> Rng {
        let mut base = Rng::new(seed ^ stream.wrapping_mul(GOLDEN_GAMMA));
        Rng::new(base.next_u64() ^ stream)
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, bound)`; `bound` must be positive. Uses the
    /// multiply-shift reduction, whose bias is below 2^-64 * bound.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Fills `out` with random bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let word = self.next_u64().to_le_bytes();
            tail.copy_from_slice(&word[..tail.len()]);
        }
    }
}

/// The SplitMix64 output function: a bijective avalanche of 64 bits.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        let mut s0 = Rng::derive(7, 0);
        let mut s1 = Rng::derive(7, 1);
        assert_ne!(s0.next_u64(), s1.next_u64());
    }

    #[test]
    fn below_stays_in_bounds_and_covers_them() {
        let mut rng = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = rng.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        for _ in 0..1000 {
            let f = rng.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
    }

    #[test]
    fn fill_covers_odd_lengths() {
        let mut a = vec![0u8; 13];
        Rng::new(3).fill(&mut a);
        let mut b = vec![0u8; 13];
        Rng::new(3).fill(&mut b);
        assert_eq!(a, b);
        assert!(a[8..].iter().any(|&x| x != 0));
    }
}
