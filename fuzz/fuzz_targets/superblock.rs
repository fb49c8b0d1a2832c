//! Decodes arbitrary bytes as a superblock: must return `Ok` or `Err`, never
//! panic or read out of bounds (see `turtlekv::fuzz::superblock`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = turtlekv::fuzz::superblock(data);
});
