//! The checkpoint pipeline: frozen MemTables go, oldest first, into the tree
//! below them on a background thread; each checkpoint is durable before the
//! MemTable is dropped and the WAL segments it covered are trimmed.

mod collect;
#[cfg(test)]
pub(crate) mod memory;
mod target;
mod tree_target;
mod worker;

pub(crate) use target::{CheckpointTarget, Coverage, TargetStats, TreeCursor, TreeVersion};
pub(crate) use tree_target::TreeTarget;
pub(crate) use worker::{Control, WorkerGuard};

/// At most this many frozen MemTables wait for their checkpoint; a writer
/// that would freeze one more waits (a write stall) instead of queueing
/// without bound. One: writers fill the active MemTable while the frozen
/// one is checkpointed. A second frozen MemTable let a 10M-record load
/// run 5% faster with the B+-tree MemTable, but its peak RSS was 60-70 MiB
/// higher, past the budget plus 25% (`docs/benchmarks.md`, "The B+-tree
/// MemTable").
pub(crate) const MAX_FROZEN_MEMTABLES: usize = 1;
