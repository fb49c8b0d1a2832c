//! Decodes arbitrary bytes as a node page: must return `Ok` or `Err`, never
//! panic or read out of bounds (see `turtlekv::fuzz::node_page`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = turtlekv::fuzz::node_page(data);
});
