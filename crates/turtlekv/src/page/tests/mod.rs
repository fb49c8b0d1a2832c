//! Tests of the page store on its own, on the fault-injecting file system
//! (and the real one where reads go through io_uring). Tests that need a
//! committed root to survive a reopen or a crash are the store layer's
//! (`store::tests`), which adds the superblock.

mod cache;
mod gate;
pub(crate) mod harness;
mod mapping_pool;
mod prefetch;
mod streamed;
