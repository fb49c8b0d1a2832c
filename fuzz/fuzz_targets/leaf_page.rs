//! Decodes arbitrary bytes as a leaf page and as one compressed chunk of a
//! leaf (LZ4 or zstd): must return `Ok` or `Err`, never panic, read out of
//! bounds or allocate past a chunk's bound (see `turtlekv::fuzz::leaf_page`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = turtlekv::fuzz::leaf_page(data);
});
