use super::*;

fn keys(range: std::ops::Range<u64>, tag: &str) -> Vec<Vec<u8>> {
    range
        .map(|i| format!("{tag}{i:012}").into_bytes())
        .collect()
}

/// Builds a filter over 20,000 keys and probes 200,000 absent keys.
fn false_positive_rate(bits_per_key: u32) -> (f64, usize) {
    let present = keys(0..20_000, "present");
    let bytes = build(present.iter().map(|k| key_hash(k)).collect(), bits_per_key);
    let filter = KeyFilter::decode(&bytes).unwrap();
    for k in &present {
        assert!(filter.may_contain(key_hash(k)), "false negative");
    }
    let absent = keys(0..200_000, "absent");
    let hits = absent
        .iter()
        .filter(|k| filter.may_contain(key_hash(k)))
        .count();
    (hits as f64 / absent.len() as f64, bytes.len())
}

#[test]
fn false_positive_rates_by_width() {
    // Measured: 8-bit ~0.39%, 16-bit ~0.002%, 32-bit 0 in 200,000 probes.
    let (rate8, len8) = false_positive_rate(10);
    assert!(rate8 < 0.006, "8-bit false positive rate {rate8}");
    assert!(len8 * 8 < 20_000 * 10, "8-bit filter uses {len8} bytes");
    let (rate16, _) = false_positive_rate(16);
    assert!(rate16 < 0.0002, "16-bit false positive rate {rate16}");
    let (rate32, _) = false_positive_rate(32);
    assert!(rate32 < 0.00001, "32-bit false positive rate {rate32}");
    eprintln!("filter false positive rates: 8-bit {rate8:.5}, 16-bit {rate16:.6}, 32-bit {rate32}");
}

#[test]
fn duplicate_hashes_and_tiny_sets_build() {
    for n in 0..40u64 {
        let mut hashes: Vec<u64> = (0..n).map(|i| i * 7919).collect();
        hashes.extend(hashes.clone()); // every hash twice
        let bytes = build(hashes, 10);
        assert!(bytes.len() <= max_encoded_len(n as usize, 10));
        if n == 0 {
            assert!(bytes.is_empty());
            continue;
        }
        let filter = KeyFilter::decode(&bytes).unwrap();
        assert!((0..n).all(|i| filter.may_contain(i * 7919)));
    }
}

#[test]
fn size_bound_holds() {
    for n in [1usize, 2, 3, 10, 100, 1000, 5000, 70_000] {
        for bits in [8, 16, 32] {
            let bytes = build(
                (0..n as u64)
                    .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                    .collect(),
                bits,
            );
            assert!(
                bytes.len() <= max_encoded_len(n, bits),
                "n {n} bits {bits}: {}",
                bytes.len()
            );
        }
    }
}

#[test]
fn disabled_and_corrupt_filters() {
    assert!(build(vec![1, 2, 3], 0).is_empty());
    assert_eq!(max_encoded_len(10, 0), 0);
    let mut bytes = build((0..100).collect(), 10);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    assert!(KeyFilter::decode(&bytes).is_err());
    assert!(KeyFilter::decode(&bytes[..10]).is_err());
}

#[test]
fn in_place_probe_agrees_with_decoded_filter() {
    for bits in [8, 16, 32] {
        let bytes = build((0..1000u64).map(|i| i * 31).collect(), bits);
        let filter = KeyFilter::decode(&bytes).unwrap();
        for probe in 0..5000u64 {
            assert_eq!(
                may_contain(&bytes, probe).unwrap(),
                filter.may_contain(probe)
            );
        }
    }
    assert!(may_contain(&[8; 40], 1).is_err());
}

#[test]
fn looked_up_slot_counts_match_the_formula() {
    for n in 0..SLOT_TABLE_KEYS + 3 {
        assert_eq!(
            fingerprint_slots(n),
            fingerprint_slots_computed(n),
            "{n} keys"
        );
    }
}

/// The prefetch reads where the probe reads: for every key in the filter,
/// the three fingerprints at `probe_offsets` XOR to the key's own
/// fingerprint, and a probe reported absent never has them agree.
#[test]
fn prefetched_offsets_are_the_probed_fingerprints() {
    let fingerprint_of = |bytes: &[u8], hash: u64| {
        let seed = Fuse8Header::parse(bytes).expect("an 8-bit filter").seed;
        let mixed = murmur3_finalizer(hash.wrapping_add(seed));
        (mixed ^ (mixed >> 32)) as u8
    };
    let xor_at = |bytes: &[u8], hash: u64| {
        let offsets = probe_offsets(bytes, hash).expect("an 8-bit filter");
        offsets.iter().fold(0u8, |acc, &at| acc ^ bytes[at])
    };
    for count in [1u64, 2, 100, 15_000] {
        let hashes: Vec<u64> = (0..count).map(|i| key_hash(&i.to_be_bytes())).collect();
        let bytes = build(hashes.clone(), 10);
        for &hash in &hashes {
            assert_eq!(xor_at(&bytes, hash), fingerprint_of(&bytes, hash));
        }
        for probe in 0..2_000u64 {
            let hash = key_hash(&(probe + 1_000_000).to_be_bytes());
            let agrees = xor_at(&bytes, hash) == fingerprint_of(&bytes, hash);
            assert_eq!(agrees, may_contain(&bytes, hash).unwrap());
        }
    }
    assert_eq!(probe_offsets(&build(vec![1, 2, 3], 16), 1), None);
    assert_eq!(probe_offsets(&[8; 10], 1), None);
    prefetch_probe(&[8; 10], 1); // malformed: a no-op, never a fault
}
