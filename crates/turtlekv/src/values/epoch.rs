//! When a value file garbage collection retired may go: once no reader
//! that could still follow a pointer into it is left.
//!
//! Readers that keep a view (snapshots, iterators, transactions, backups)
//! pin the epoch current when the view is taken. Retiring files puts them
//! in the current epoch and starts the next; each epoch keeps the next
//! alive, so an epoch's files go once its own readers and every older
//! epoch's are gone.

use std::sync::Arc;

use parking_lot::Mutex;

use super::ValueStore;

#[derive(Debug)]
pub(super) struct Epoch {
    /// Files retired while this epoch was current.
    doomed: Mutex<Vec<u64>>,
    next: Mutex<Option<Arc<Epoch>>>,
    /// Where the doomed files go once this epoch ends.
    deletable: Arc<Mutex<Vec<u64>>>,
}

impl Epoch {
    pub(super) fn new(deletable: Arc<Mutex<Vec<u64>>>) -> Self {
        Epoch {
            doomed: Mutex::new(Vec::new()),
            next: Mutex::new(None),
            deletable,
        }
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        // Files only: the removal itself is the collector's, not the
        // reader's whose drop this is.
        let doomed = std::mem::take(&mut *self.doomed.lock());
        self.deletable.lock().extend(doomed);
    }
}

/// A reader's hold on the value files it may read (`ValueStore::pin`).
#[derive(Debug, Clone)]
pub(crate) struct ValuePin(#[expect(dead_code, reason = "held for its drop")] Arc<Epoch>);

impl ValueStore {
    /// Keeps every value file a reader with a view taken now may read.
    pub fn pin(&self) -> ValuePin {
        ValuePin(self.epoch.lock().clone())
    }

    /// Retires `files`: they are removed (`remove_unpinned`) once every
    /// pin taken before this call is dropped.
    pub fn retire(&self, files: Vec<u64>) {
        let mut current = self.epoch.lock();
        current.doomed.lock().extend(files);
        let next = Arc::new(Epoch::new(self.deletable.clone()));
        *current.next.lock() = Some(next.clone());
        *current = next;
    }
}
