//! The write-ahead log: framed, checksummed records in segment files, written
//! by one group-commit leader at a time and replayed on open.

mod binding;
#[cfg(test)]
pub(crate) mod compat_tests;
#[cfg(any(test, feature = "sim"))]
pub(crate) mod fuzz_hook;
mod group_commit;
#[cfg(test)]
mod history_tests;
mod log;
mod payload_v1;
mod payload_v2;
mod position;
mod record;
mod replay;
mod reserve_ahead;
mod segment;
mod verify;

pub(crate) use binding::{LogBinding, log_identity};
pub(crate) use group_commit::{GroupCommit, Request};
pub(crate) use log::{BeforeSync, Wal};
pub(crate) use position::WalPosition;
pub(crate) use record::{MAX_PAYLOAD_BYTES, encoded_len};
pub(crate) use replay::{Refused, falls_short};
#[cfg(test)]
pub(crate) use segment::{check_header, list_segments, segment_file_name};

/// Sub-directory of the database that holds the segments.
pub(crate) const WAL_DIR: &str = "wal";
