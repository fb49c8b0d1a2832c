//! Decodes arbitrary bytes as a wal record: must return `Ok` or `Err`, never
//! panic or read out of bounds (see `turtlekv::fuzz::wal_record`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = turtlekv::fuzz::wal_record(data);
});
