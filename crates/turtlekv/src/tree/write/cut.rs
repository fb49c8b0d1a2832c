//! Cutting sorted runs into pages: leaves between `leaf_size/4` and the page
//! limit (balanced when the last part would be too small), and batches into
//! leaf-sized pieces.

use crate::tree::TreeConfig;
use crate::tree::format::item::Item;
use crate::tree::format::leaf::LeafSizer;

/// Page size the items would serialise to.
pub(in crate::tree) fn leaf_page_bytes(items: &[Item], config: &TreeConfig) -> usize {
    let mut sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
    items.iter().for_each(|it| sizer.add(it));
    sizer.page_bytes()
}

/// Cuts sorted items into leaf pages that each fit the page limit. With more
/// than one part every part holds at least `leaf_min_bytes` when the items
/// allow it. Always returns at least one (possibly empty) part.
pub(in crate::tree) fn cut_leaves(items: Vec<Item>, config: &TreeConfig) -> Vec<Vec<Item>> {
    let total = leaf_page_bytes(&items, config);
    if total <= config.leaf_max_bytes {
        return vec![items];
    }
    // Aim for equal parts of at most ~90% of a page so later merges have room.
    let parts = total.div_ceil(config.leaf_max_bytes * 9 / 10);
    let (starts, mut part_bytes) = part_starts(&items, total / parts, config);
    let mut out = split_at(items, &starts);
    if rebalance_tail(&mut out, config) {
        // The last two parts changed: size them again.
        part_bytes.truncate(out.len().saturating_sub(2));
        let tail = part_bytes.len();
        part_bytes.extend(out[tail..].iter().map(|p| leaf_page_bytes(p, config)));
    }
    join_small_parts(&mut out, part_bytes, config);
    out
}

/// Joins each part under `leaf_min_bytes` with a neighbour it fits one
/// page with. Greedy cuts leave such a part where an item of most of a
/// page would not fit after it; a leaf that small beside one it could join
/// is what `check()` rejects, and what `fix_underfull` would join later.
fn join_small_parts(parts: &mut Vec<Vec<Item>>, mut bytes: Vec<usize>, config: &TreeConfig) {
    debug_assert!(
        bytes.len() == parts.len()
            && parts
                .iter()
                .zip(&bytes)
                .all(|(p, &b)| leaf_page_bytes(p, config) == b),
        "part sizes out of step"
    );
    let mut i = 0;
    while i + 1 < parts.len() {
        let small = bytes[i] < config.leaf_min_bytes || bytes[i + 1] < config.leaf_min_bytes;
        if small {
            let mut joined = parts[i].clone();
            joined.extend(parts[i + 1].iter().cloned());
            let joined_bytes = leaf_page_bytes(&joined, config);
            if joined_bytes <= config.leaf_max_bytes {
                parts[i] = joined;
                parts.remove(i + 1);
                bytes[i] = joined_bytes;
                bytes.remove(i + 1);
                // The joined part may still be small: look at it again,
                // with its left neighbour too.
                i = i.saturating_sub(1);
                continue;
            }
        }
        i += 1;
    }
}

/// Splits the full leaves (about 90% of a page each) off the front of a
/// growing sorted run, for a merge that cuts its output as it goes. The
/// last two parts stay in `items`, so that `cut_leaves` at the end of the
/// run can balance its tail.
pub(in crate::tree) fn take_full_leaves(
    items: &mut Vec<Item>,
    config: &TreeConfig,
) -> Vec<Vec<Item>> {
    let (starts, _) = part_starts(items, config.leaf_max_bytes * 9 / 10, config);
    if starts.len() < 2 {
        return Vec::new();
    }
    let rest = items.split_off(starts[starts.len() - 2]);
    let full = std::mem::replace(items, rest);
    split_at(full, &starts[..starts.len() - 2])
}

/// Indexes where a new part starts when parts hold about `target_bytes`
/// of page each and never more than the page limit, and each part's page
/// bytes.
fn part_starts(
    items: &[Item],
    target_bytes: usize,
    config: &TreeConfig,
) -> (Vec<usize>, Vec<usize>) {
    let mut starts = Vec::new();
    let mut part_bytes = Vec::new();
    let mut sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
    // `page_bytes` is not free (it sizes the filter): carry the current
    // part's figure over instead of computing it twice per item.
    let mut sizer_bytes = sizer.page_bytes();
    for (i, item) in items.iter().enumerate() {
        let mut next = sizer;
        next.add(item);
        let next_bytes = next.page_bytes();
        let full = sizer_bytes >= target_bytes || next_bytes > config.leaf_max_bytes;
        if full && sizer.items() > 0 {
            starts.push(i);
            part_bytes.push(sizer_bytes);
            sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
            sizer.add(item);
            sizer_bytes = sizer.page_bytes();
        } else {
            sizer = next;
            sizer_bytes = next_bytes;
        }
    }
    part_bytes.push(sizer_bytes);
    (starts, part_bytes)
}

/// Cuts `items` into parts beginning at `starts` (ascending, all > 0).
fn split_at(mut items: Vec<Item>, starts: &[usize]) -> Vec<Vec<Item>> {
    // Split from the back so each split moves only its own part.
    let mut out: Vec<Vec<Item>> = Vec::with_capacity(starts.len() + 1);
    for &start in starts.iter().rev() {
        out.push(items.split_off(start));
    }
    out.push(items);
    out.reverse();
    out
}

/// If the last part is too small, joins it with the one before, or splits
/// the two evenly by bytes when they do not fit one page. Returns whether
/// it changed them.
fn rebalance_tail(parts: &mut Vec<Vec<Item>>, config: &TreeConfig) -> bool {
    let n = parts.len();
    if n < 2 || leaf_page_bytes(&parts[n - 1], config) >= config.leaf_min_bytes {
        return false;
    }
    let last = parts.pop().expect("two parts");
    let mut joined = parts.pop().expect("two parts");
    let greedy_cut = joined.len();
    joined.extend(last);
    // If both fit one page, one part; otherwise each half of an even cut
    // holds about half a page, well above the minimum.
    if leaf_page_bytes(&joined, config) <= config.leaf_max_bytes {
        parts.push(joined);
        return true;
    }
    let half = crate::tree::format::item::total_size_bytes(&joined) / 2;
    let mut acc = 0;
    let even_cut = joined
        .iter()
        .position(|it| {
            acc += it.size_bytes();
            acc > half
        })
        .unwrap_or(joined.len() - 1)
        .max(1);
    let fits = leaf_page_bytes(&joined[..even_cut], config) <= config.leaf_max_bytes
        && leaf_page_bytes(&joined[even_cut..], config) <= config.leaf_max_bytes;
    // With huge items an even cut may not fit; then keep the greedy one.
    let right = joined.split_off(if fits { even_cut } else { greedy_cut });
    parts.push(joined);
    parts.push(right);
    true
}

/// Cuts a batch into pieces of about `max_bytes` of items each.
pub(in crate::tree) fn cut_batch(items: Vec<Item>, max_bytes: usize) -> Vec<Vec<Item>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for item in items {
        let size = item.size_bytes();
        if bytes + size > max_bytes && !current.is_empty() {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(item);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    fn config() -> TreeConfig {
        TreeConfig::new(512, 4096, 10, 256 << 20)
    }

    fn items(keys: std::ops::Range<u32>, value_bytes: usize) -> Vec<Item> {
        keys.map(|k| Item::put(k.to_be_bytes().to_vec(), vec![7u8; value_bytes]))
            .collect()
    }

    #[test]
    fn a_run_cut_as_it_grows_keeps_every_item_in_fitting_leaves() {
        let config = config();
        for value_bytes in [10, 100, 900] {
            let mut tail = Vec::new();
            let mut parts = Vec::new();
            for chunk in 0..40u32 {
                tail.extend(items(chunk * 50..(chunk + 1) * 50, value_bytes));
                parts.extend(take_full_leaves(&mut tail, &config));
            }
            let taken = parts.len();
            assert!(taken > 2, "value {value_bytes}: only {taken} leaves taken");
            parts.extend(cut_leaves(tail, &config));
            let all: Vec<Item> = parts.iter().flatten().cloned().collect();
            assert_eq!(all, items(0..2000, value_bytes));
            for (i, part) in parts.iter().enumerate() {
                let bytes = leaf_page_bytes(part, &config);
                assert!(bytes <= config.leaf_max_bytes, "part {i}: {bytes} bytes");
                // Taken leaves are full (a page less about one item); the
                // end's balanced cut keeps the last ones above the minimum.
                let least = if i < taken {
                    config.leaf_max_bytes * 2 / 3
                } else {
                    config.leaf_min_bytes
                };
                assert!(
                    bytes >= least,
                    "value {value_bytes}, part {i}: {bytes} bytes"
                );
            }
        }
    }

    #[test]
    fn a_short_run_is_left_whole() {
        let config = config();
        let mut tail = items(0..10, 100);
        assert!(take_full_leaves(&mut tail, &config).is_empty());
        assert_eq!(tail, items(0..10, 100));
    }
}
