//! One module per command (`put`, `get` and `delete` share one).

pub mod backup;
pub mod bench;
pub mod check;
pub mod checkpoint;
pub mod dump;
pub mod keyspaces;
pub mod kv;
pub mod load;
pub mod scan;
pub mod stats;
pub mod tune;
