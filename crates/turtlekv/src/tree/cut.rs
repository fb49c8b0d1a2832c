//! Cutting sorted runs into pages: leaves between `leaf_size/4` and the page
//! limit (balanced when the last part would be too small), and batches into
//! leaf-sized pieces.

use super::TreeConfig;
use super::item::Item;
use super::leaf::LeafSizer;

/// Page size the items would serialise to.
pub(super) fn leaf_page_bytes(items: &[Item], config: &TreeConfig) -> usize {
    let mut sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
    items.iter().for_each(|it| sizer.add(it));
    sizer.page_bytes()
}

/// Cuts sorted items into leaf pages that each fit the page limit. With more
/// than one part every part holds at least `leaf_min_bytes` when the items
/// allow it. Always returns at least one (possibly empty) part.
pub(super) fn cut_leaves(mut items: Vec<Item>, config: &TreeConfig) -> Vec<Vec<Item>> {
    let total = leaf_page_bytes(&items, config);
    if total <= config.leaf_max_bytes {
        return vec![items];
    }
    // Aim for equal parts of at most ~90% of a page so later merges have room.
    let parts = total.div_ceil(config.leaf_max_bytes * 9 / 10);
    let target = total / parts;
    let mut starts = Vec::with_capacity(parts);
    let mut sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
    // `page_bytes` is not free (it sizes the filter): carry the current
    // part's figure over instead of computing it twice per item.
    let mut sizer_bytes = sizer.page_bytes();
    for (i, item) in items.iter().enumerate() {
        let mut next = sizer;
        next.add(item);
        let next_bytes = next.page_bytes();
        let full = sizer_bytes >= target || next_bytes > config.leaf_max_bytes;
        if full && sizer.items() > 0 {
            starts.push(i);
            sizer = LeafSizer::new(config.block_size_bytes, config.filter_bits_per_key);
            sizer.add(item);
            sizer_bytes = sizer.page_bytes();
        } else {
            sizer = next;
            sizer_bytes = next_bytes;
        }
    }
    // Split from the back so each split moves only its own part.
    let mut out: Vec<Vec<Item>> = Vec::with_capacity(starts.len() + 1);
    for &start in starts.iter().rev() {
        out.push(items.split_off(start));
    }
    out.push(items);
    out.reverse();
    rebalance_tail(&mut out, config);
    out
}

/// If the last part is too small, joins it with the one before, or splits
/// the two evenly by bytes when they do not fit one page.
fn rebalance_tail(parts: &mut Vec<Vec<Item>>, config: &TreeConfig) {
    let n = parts.len();
    if n < 2 || leaf_page_bytes(&parts[n - 1], config) >= config.leaf_min_bytes {
        return;
    }
    let last = parts.pop().expect("two parts");
    let mut joined = parts.pop().expect("two parts");
    let greedy_cut = joined.len();
    joined.extend(last);
    // If both fit one page, one part; otherwise each half of an even cut
    // holds about half a page, well above the minimum.
    if leaf_page_bytes(&joined, config) <= config.leaf_max_bytes {
        parts.push(joined);
        return;
    }
    let half = super::item::total_size_bytes(&joined) / 2;
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
}

/// Cuts a batch into pieces of about `max_bytes` of items each.
pub(super) fn cut_batch(items: Vec<Item>, max_bytes: usize) -> Vec<Vec<Item>> {
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
