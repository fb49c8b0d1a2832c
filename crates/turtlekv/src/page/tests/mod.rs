//! Tests of the page store as a whole, on the fault-injecting file system.

mod basic;
mod harness;
