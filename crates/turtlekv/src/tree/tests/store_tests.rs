//! The tree on the real page store (over the in-memory fault-injecting file
//! system): commits with the dead-page lists, reopening at the committed
//! root, and the store's live-set rebuild through `referenced_pages`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::harness::{Rng, random_batch};
use crate::io::{FaultFs, FileSystem};
use crate::page::{ObjectKind, PageId, PageIo, PageStore, PageStoreOptions};
use crate::tree::Tree;
use crate::tree::TreeConfig;
use crate::tree::format::leaf::LeafHead;
use crate::tree::format::node_codec::referenced_pages;

const NODE_SIZE_BYTES: u64 = 1024;
const LEAF_SIZE_BYTES: u64 = 16 * 1024;

/// The newest committed generation and root, as a superblock would keep
/// them.
type Committed = (u64, Option<PageId>);

/// The store in `/db`, opened at `committed`, and the tree on it.
fn open(fs: &FaultFs, committed: Committed) -> (Arc<PageStore>, Tree) {
    let fs: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let options = PageStoreOptions {
        node_size_bytes: NODE_SIZE_BYTES,
        leaf_size_bytes: LEAF_SIZE_BYTES,
        cache_capacity_bytes: 1 << 20,
        direct_io: false,
        cache_written_leaves: true,
    };
    fs.create_dir_all(Path::new("/db")).unwrap();
    let mut store = PageStore::open(fs, Path::new("/db"), &options).unwrap();
    let list = |bytes: &[u8]| referenced_pages(bytes);
    store
        .install_root(committed.0, committed.1, true, &list)
        .unwrap();
    let store = Arc::new(store);
    let io: Arc<dyn PageIo> = store.clone();
    let config = TreeConfig::new(NODE_SIZE_BYTES, LEAF_SIZE_BYTES, 10, 1 << 20);
    (store, Tree::new(io, config))
}

/// Commits `root`; returns what a reopen starts from.
fn commit(store: &PageStore, root: Option<PageId>, dead_pages: &[PageId]) -> Committed {
    let generation = store.commit(root, dead_pages, &mut |_| Ok(())).unwrap();
    (generation, root)
}

fn scan_all(tree: &Tree, root: Option<crate::page::PageId>) -> Vec<(Bytes, Bytes)> {
    tree.scan(root, Bound::Unbounded, Bound::Unbounded, false)
        .map(Result::unwrap)
        .collect()
}

#[test]
fn tree_on_the_page_store_survives_reopen() {
    let fs = FaultFs::new();
    let mut model: BTreeMap<Bytes, Bytes> = BTreeMap::new();
    let mut rng = Rng::new(31);
    let mut committed = (0, None);
    for _ in 0..3u64 {
        let (store, tree) = open(&fs, committed);
        let mut root = committed.1;
        assert!(scan_all(&tree, root).into_iter().eq(model.clone()));
        for _ in 0..15u64 {
            let batch: Vec<(Bytes, Option<Bytes>)> = random_batch(&mut rng, 40_000, 2500, 15)
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        v.map(|v| Bytes::from(vec![v.first().copied().unwrap_or(0); 40 + v.len()])),
                    )
                })
                .collect();
            let outcome = tree.apply_batch(root, &batch).unwrap();
            for (k, v) in batch {
                match v {
                    Some(v) => model.insert(k, v),
                    None => model.remove(&k),
                };
            }
            committed = commit(&store, outcome.root, &outcome.dead_pages);
            root = outcome.root;
            tree.check(root).unwrap();
        }
        assert!(scan_all(&tree, root).into_iter().eq(model.clone()));
        let keys: Vec<Bytes> = model.keys().cloned().collect();
        for k in keys.iter().step_by(50) {
            assert_eq!(tree.get_bytes(root, k).unwrap().as_ref(), model.get(k));
        }
        assert_eq!(committed.1, root);
    }
    let (_, tree) = open(&fs, committed);
    let stats = tree.check(committed.1).unwrap();
    assert!(stats.height >= 2, "{stats:?}");
}

/// Heads and filters the cache keeps decoded hold no slice of a whole
/// cached page: once the cache lets the page go, nothing else keeps its
/// buffer (2 MiB at the default leaf size) resident.
#[test]
fn cached_heads_and_filters_do_not_pin_whole_pages() {
    let fs = FaultFs::new();
    let (store, tree) = open(&fs, (0, None));
    let root = None;
    let mut rng = Rng::new(7);
    let batch: Vec<(Bytes, Option<Bytes>)> = random_batch(&mut rng, 20_000, 3000, 0)
        .into_iter()
        .map(|(k, _)| (k, Some(Bytes::from(vec![9u8; 100]))))
        .collect();
    let outcome = tree.apply_batch(root, &batch).unwrap();
    commit(&store, outcome.root, &outcome.dead_pages);
    // Every get reads its leaves' heads and filters from the whole pages
    // the checkpoint cached as it wrote them.
    for (k, v) in &batch {
        assert_eq!(
            tree.get_bytes(outcome.root, k).unwrap().as_ref(),
            v.as_ref()
        );
    }
    let pages = store.cached_leaf_pages();
    assert!(pages.len() > 3, "the written leaves were cached whole");
    let (mut heads, mut filters) = (0, 0);
    for (id, page) in pages {
        let within = |b: &Bytes| page.as_ptr_range().contains(&b.as_ptr());
        if let Some(head) = store.cached_object(id, ObjectKind::LeafHead) {
            let head = head.downcast::<LeafHead>().unwrap();
            assert!(!within(head.raw_bytes()), "{id:?}");
            heads += 1;
        }
        if let Some(filter) = store.cached_object(id, ObjectKind::Filter) {
            let filter = filter.downcast::<crate::tree::CachedFilter>().unwrap();
            assert!(!within(&filter.bytes), "{id:?}");
            filters += 1;
        }
    }
    assert!(heads > 3 && filters > 3, "{heads} heads, {filters} filters");
}
