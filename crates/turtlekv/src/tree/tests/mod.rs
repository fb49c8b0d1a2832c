//! Tests of the tree as a whole: against a `BTreeMap` model (random and
//! property-based batches), on crafted and damaged pages, counting reads,
//! and on the real page store.

mod crafted_tests;
mod decode_tests;
pub(crate) mod harness;
mod io_tests;
pub(crate) mod mem_io;
mod model_tests;
mod multi_get_tests;
mod prop_tests;
mod random_tests;
mod scan_edge_tests;
mod space_tests;
mod store_tests;
