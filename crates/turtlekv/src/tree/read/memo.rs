//! Shortcuts from a cached node index to the decoded objects its lookups
//! keep asking the page cache for: each referenced leaf's filter and head,
//! each child's node index.
//!
//! A point lookup in a tree of height 2 asked the page cache about ten
//! times (two node indexes, a filter per active segment on its path, a
//! head per filter that let it through, a block), and each ask takes a
//! shard lock, probes a hash map, follows the entry and counts a
//! reference: four or five cache-line misses when the tree is larger than
//! the CPU's caches. A memo is a `Weak` beside the reference: it upgrades
//! while the page cache (or another reader) still holds the object, so
//! the cache stays its only owner, and what a memo can keep (the
//! allocation of an object that died while remembered) is charged to the
//! node index. Only an object the cache handed out is remembered: a copy
//! read on a miss may be one the cache refused (a cache over capacity,
//! or another reader's copy cached first), which would die at once. Once the cache has let the object go the
//! lookup asks the cache again, and the memo, set once, stays empty for
//! the life of this node index (a checkpoint that rewrites the node
//! starts a new one).
//!
//! A hit through a memo does not renew the object's CLOCK weight in the
//! page cache. While heads, filters and nodes stay within their protected
//! share of the cache (half of it), sweeps age them only when no leaf
//! block is left to evict, so weights rarely matter; past that share a
//! memoized object may be evicted sooner, and the lookups after it go
//! through the cache, which renews it. `Stats::cache_hits` counts no hit
//! through a memo.

use std::sync::{Arc, OnceLock, Weak};

/// A remembered object, valid for as long as someone else keeps it.
pub(crate) struct Memo<T>(OnceLock<Weak<T>>);

impl<T> Memo<T> {
    /// The remembered object, if it is still alive.
    #[inline]
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        self.0.get()?.upgrade()
    }

    /// Whether something was remembered, alive or not.
    #[cfg(test)]
    pub(crate) fn is_set(&self) -> bool {
        self.0.get().is_some()
    }

    /// Remembers `object` unless something was remembered before.
    pub(crate) fn remember(&self, object: &Arc<T>) {
        let _ = self.0.set(Arc::downgrade(object));
    }

    /// The remembered object if alive, else what `read` returns: the
    /// object and whether the page cache handed it out. Only such an
    /// object is remembered: a copy read on a miss may be one the cache
    /// refused, which would die at once and leave the memo, set once,
    /// empty for good; the next read finds the cached copy.
    #[inline]
    pub(crate) fn get_or_read<E>(
        &self,
        read: impl FnOnce() -> Result<(Arc<T>, bool), E>,
    ) -> Result<Arc<T>, E> {
        if let Some(object) = self.get() {
            return Ok(object);
        }
        let (object, cached) = read()?;
        if cached {
            self.remember(&object);
        }
        Ok(object)
    }

    /// Memory a memo keeps beyond its own slot: the allocation of an
    /// object that died while remembered (a `Weak` keeps the allocation,
    /// not what the object owned).
    pub(crate) const fn dead_object_bytes() -> usize {
        2 * std::mem::size_of::<usize>() + std::mem::size_of::<T>()
    }
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo(OnceLock::new())
    }
}

impl<T> std::fmt::Debug for Memo<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.0.get() {
            None => "empty",
            Some(weak) if weak.strong_count() > 0 => "alive",
            Some(_) => "gone",
        };
        write!(f, "Memo({state})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_answers_only_while_someone_else_keeps_the_object() {
        let memo = Memo::default();
        assert!(memo.get().is_none() && !memo.is_set());
        assert_eq!(format!("{memo:?}"), "Memo(empty)");
        let object = Arc::new(7u64);
        memo.remember(&object);
        assert_eq!(memo.get().as_deref(), Some(&7));
        assert_eq!(format!("{memo:?}"), "Memo(alive)");
        // Set once: a later object is not remembered over a live one.
        memo.remember(&Arc::new(8u64));
        assert_eq!(memo.get().as_deref(), Some(&7));
        drop(object);
        assert!(memo.get().is_none(), "the memo must not keep the object");
        assert!(memo.is_set());
        assert_eq!(format!("{memo:?}"), "Memo(gone)");
    }

    #[test]
    fn get_or_read_remembers_only_what_the_cache_handed_out() {
        let cached = Arc::new(1u64);
        let memo = Memo::default();
        let read = |object: &Arc<u64>, hit: bool| Ok::<_, ()>((object.clone(), hit));
        let copy = memo.get_or_read(|| read(&Arc::new(2), false)).unwrap();
        assert_eq!(*copy, 2);
        assert!(!memo.is_set(), "a copy read on a miss is not remembered");
        assert_eq!(*memo.get_or_read(|| read(&cached, true)).unwrap(), 1);
        let unread = memo.get_or_read(|| -> Result<(Arc<u64>, bool), ()> { panic!("read") });
        assert_eq!(*unread.unwrap(), 1, "answered from the memo");
        assert_eq!(
            memo.get_or_read(|| Err::<(Arc<u64>, bool), _>(7)),
            Ok(cached)
        );
    }
}
