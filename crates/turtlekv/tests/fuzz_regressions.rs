//! Inputs the fuzz targets found to crash the engine, each kept as a test
//! named after what it found.

use turtlekv::fuzz;

fn leaf(version: u16) -> Vec<u8> {
    let items: Vec<_> = (0..20u32)
        .map(|i| (format!("key{i:04}").into_bytes(), Some(vec![i as u8; 9])))
        .collect();
    fuzz::seeds::leaf_page(version, &items, 256, 10)
}

/// A leaf head whose checksum holds but whose item or chunk count is
/// absurd made the decoder reserve memory for that many items and abort
/// the process (`LeafHead::decode_all`, `decode`, `decode_chunk`).
#[test]
fn leaf_head_claiming_billions_of_items_is_an_error_not_an_abort() {
    for version in [1, 2] {
        for field_offset in [8, 12] {
            let mut page = leaf(version);
            page[field_offset..field_offset + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            // `leaf_page` also decodes a copy with the head checksum
            // repaired, which is what reached the allocation.
            assert!(fuzz::leaf_page(&page).is_err(), "count at {field_offset}");
        }
        assert_eq!(fuzz::leaf_page(&leaf(version)), Ok(20));
    }
}
