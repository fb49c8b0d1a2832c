//! Runs arbitrary bytes as a sequence of API operations against the engine
//! and a `BTreeMap` model; panics at the first difference (see
//! `turtlekv::fuzz::api_ops`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    turtlekv::fuzz::api_ops(data);
});
