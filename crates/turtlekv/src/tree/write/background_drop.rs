//! Dropping a batch update's spent inputs off its serial path.
//!
//! A batch update runs mostly on one thread of the checkpoint pool; the
//! other threads help only in its parallel merges and page writes. Freeing
//! a leaf's worth of items (two `Bytes` reference counts each, and their
//! vectors) took about a sixth of that serial thread's time in an in-cache
//! load profile, while the pool's other thread sat idle. So the inputs a
//! merge has used up go to the pool as a job of their own.

/// Drops `value` in a job on the current rayon pool when this thread is
/// one of its workers and the pool has another; else right here (a
/// one-thread pool, or a caller outside any pool, gains nothing from it).
pub(in crate::tree) fn drop_in_background<T: Send + 'static>(value: T) {
    if rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1 {
        rayon::spawn(move || drop(value));
    } else {
        drop(value);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;

    use super::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Sends the id of the thread that drops it.
    struct Tell(mpsc::Sender<std::thread::ThreadId>);

    impl Drop for Tell {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    #[test]
    fn outside_a_pool_the_value_is_dropped_at_once() {
        let value = Arc::new(vec![1u8; 10]);
        let weak = Arc::downgrade(&value);
        drop_in_background(value);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn inside_a_pool_the_value_is_dropped_by_a_pool_thread() {
        let pool = pool(2);
        let (tx, rx) = mpsc::channel();
        let pool_threads: Vec<_> = pool.broadcast(|_| std::thread::current().id());
        pool.install(|| drop_in_background(Tell(tx)));
        let dropped_on = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the value is dropped");
        assert!(pool_threads.contains(&dropped_on));
    }

    #[test]
    fn in_a_one_thread_pool_the_value_is_dropped_at_once() {
        let pool = pool(1);
        let (tx, rx) = mpsc::channel();
        pool.install(move || {
            drop_in_background(Tell(tx));
            assert!(rx.try_recv().is_ok(), "dropped before returning");
        });
    }
}
