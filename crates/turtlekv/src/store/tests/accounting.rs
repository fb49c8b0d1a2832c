//! The deep check is exact about page accounting: every allocated page is
//! reachable, waits for reuse, or belongs to the commit in progress.

use super::harness::{Version, list_children, open, record, small_options};
use crate::io::FaultFs;

/// A committed page that no root reaches and that waits for no reader
/// (a leak: a batch update that forgot to report a dead page) must be
/// reported by the deep check; it is never reused while the handle lives.
#[test]
fn check_reports_a_page_nothing_reaches_and_nothing_frees() {
    let fs = FaultFs::new();
    let (store, _) = open(&fs, &small_options()).unwrap();
    let leaf = Version::new_leaf(&store, 1, 3000).unwrap();
    let v1 = Version::write(&store, vec![leaf]).unwrap();
    store.commit(record(Some(v1.root), 1), &[]).unwrap();
    // Version 2 replaces the leaf and the root but reports only the root dead.
    let leaf2 = Version::new_leaf(&store, 2, 3000).unwrap();
    let v2 = Version::write(&store, vec![leaf2]).unwrap();
    store.commit(record(Some(v2.root), 2), &[v1.root]).unwrap();
    store.reclaim().unwrap();
    let stats = store.stats();
    assert_eq!(stats.live_leaf_pages, 2, "the old leaf is leaked");
    let r = store.check(&store.pin(), &list_children);
    assert!(r.is_err(), "check passed with a leaked page: {r:?}");
}
