//! Decodes arbitrary bytes as a leaf page: must return `Ok` or `Err`, never
//! panic or read out of bounds (see `turtlekv::fuzz::leaf_page`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = turtlekv::fuzz::leaf_page(data);
});
