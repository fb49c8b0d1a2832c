//! What every handle of one keyspace shares.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::tag::{KeyspaceId, Tag};
use crate::util::striped::StripedCounter;
use crate::{Error, Result};

/// One keyspace: its name, its tag, whether it was dropped, its counters.
#[derive(Debug)]
pub(crate) struct KeyspaceCore {
    pub id: KeyspaceId,
    /// Empty for the default keyspace.
    pub name: Bytes,
    pub tag: Tag,
    dropped: AtomicBool,
    pub counts: KeyspaceCounts,
}

/// Operations on one keyspace, counted by the threads that ask for them
/// (striped, as they may be many).
#[derive(Debug, Default)]
pub(crate) struct KeyspaceCounts {
    pub puts: StripedCounter,
    pub deletes: StripedCounter,
    pub gets: StripedCounter,
    pub scans: StripedCounter,
}

impl KeyspaceCore {
    pub fn new(id: KeyspaceId, name: Bytes, tag: Tag) -> Self {
        KeyspaceCore {
            id,
            name,
            tag,
            dropped: AtomicBool::new(false),
            counts: KeyspaceCounts::default(),
        }
    }

    /// Refuses every use of a dropped keyspace.
    #[inline]
    pub fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::KeyspaceDropped(self.name.to_vec()));
        }
        Ok(())
    }

    /// Marks the keyspace dropped; its handles fail from now on.
    pub fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    /// Counts a committed batch's entries in this keyspace.
    pub fn count_writes(&self, puts: u64, deletes: u64) {
        self.counts.puts.add(puts);
        self.counts.deletes.add(deletes);
    }
}
