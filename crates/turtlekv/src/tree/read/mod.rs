//! The read path: point lookups and range scans over a stored root, through
//! node indexes, filters, leaf heads and chunks the page cache keeps
//! decoded, and the memos that let repeated lookups skip the cache.

pub(crate) mod get;
pub(crate) mod memo;
pub(crate) mod multi_get;
pub(crate) mod probe;
pub(crate) mod scan;
pub(crate) mod scan_source;
