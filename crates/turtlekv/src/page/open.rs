//! Opening the page store: open the page files, check the page sizes, and
//! rebuild the set of live pages by walking node pages from the committed
//! root the store layer names (leaves are named by their parents, never
//! read).

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::alloc::SlotAllocator;
use super::cache::PageCache;
use super::codec::Geometry;
use super::prefetch::PrefetchPool;
use super::store::{IoCounters, ListChildren, PageFile, PageStore, PageStoreOptions, kind_index};
use super::versions::Versions;
use super::{CachePriority, PageId, PageKind};
use crate::io::{FileSystem, OpenOptions};
use crate::{Error, Result};

/// File names of the node and leaf page files.
pub(crate) const PAGE_FILE_NAMES: [&str; 2] = ["nodes.pages", "leaves.pages"];

impl PageStore {
    /// Opens (creating them when missing) the page files in `dir`, which
    /// must exist. Nothing is allocated until [`PageStore::install_root`]
    /// names the committed root.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        options: &PageStoreOptions,
    ) -> Result<PageStore> {
        check_options(options)?;
        let files = PAGE_FILE_NAMES.map(|name| dir.join(name));
        let files = [PageKind::Node, PageKind::Leaf].map(|kind| {
            let path = files[kind_index(kind)].clone();
            let file = fs
                .open(
                    &path,
                    OpenOptions::read_write_create().with_direct(options.direct_io),
                )
                .map_err(|e| Error::opening(e, options.direct_io, &path))?;
            Ok::<_, Error>(PageFile {
                file,
                path,
                geometry: Geometry::new(kind, options.node_size_bytes, options.leaf_size_bytes),
                dirty: AtomicBool::new(false),
            })
        });
        let [nodes, leaves] = files;
        let files = [nodes?, leaves?];
        Ok(PageStore {
            alloc: Mutex::new([PageKind::Node, PageKind::Leaf].map(|kind| {
                SlotAllocator::with_live(kind, files[kind_index(kind)].geometry.slot_blocks(), [])
            })),
            files,
            options: *options,
            versions: Versions::new(0, None),
            cache: PageCache::new(options.cache_capacity_bytes),
            commit_lock: Mutex::new(()),
            poison: OnceLock::new(),
            counters: IoCounters::default(),
            prefetch_pool: PrefetchPool::default(),
            punches: Mutex::default(),
        })
    }

    /// `true` when neither page file holds a byte: a store whose creation
    /// never committed a root.
    pub fn is_empty(&self) -> Result<bool> {
        for pf in &self.files {
            if pf.file.len()? != 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Seeds every block checksum with `checksum_seed` (the database
    /// identity's, `docs/format.md`, "Blocks"), accepting unseeded blocks
    /// too with `accept_unseeded`. Set before the first page is read.
    pub fn set_checksum_seed(&mut self, checksum_seed: u32, accept_unseeded: bool) {
        for pf in &mut self.files {
            pf.geometry = pf
                .geometry
                .with_checksum_seed(checksum_seed, accept_unseeded);
        }
    }

    /// Syncs both page files (their creation, before the first root).
    pub fn sync_files(&self) -> Result<()> {
        for pf in &self.files {
            pf.file.sync_data()?;
        }
        Ok(())
    }

    /// Takes `root`, committed as `generation`, as the newest root: the
    /// pages it reaches are live, every other slot is free. With
    /// `clean_up`, truncates each file after its last live slot and punches
    /// every free leaf slot (it may hold pages of a checkpoint that never
    /// committed, or pages freed before a crash). Called once, after
    /// `open` and before anything is written or pinned.
    pub fn install_root(
        &mut self,
        generation: u64,
        root: Option<PageId>,
        clean_up: bool,
        list_children: ListChildren<'_>,
    ) -> Result<()> {
        self.versions = Versions::new(generation, root);
        let live = self.reachable(root, list_children, Some(CachePriority::Node))?;
        self.install_live(live, clean_up)
    }

    /// Every page reachable from `root`, by kind, reading node pages only;
    /// `priority: None` reads them past the cache. Rejects ids that cannot
    /// name a page and two ids sharing one slot.
    pub(super) fn reachable(
        &self,
        root: Option<PageId>,
        list_children: ListChildren<'_>,
        priority: Option<CachePriority>,
    ) -> Result<[HashMap<u64, PageId>; 2]> {
        let mut live: [HashMap<u64, PageId>; 2] = Default::default();
        let file_lens = [self.files[0].file.len()?, self.files[1].file.len()?];
        let mut stack: Vec<(PageId, Option<PageId>)> =
            root.map(|r| (r, None)).into_iter().collect();
        while let Some((id, parent)) = stack.pop() {
            let pf = self.file_of(id);
            let slots = &mut live[kind_index(id.kind())];
            match slots.get(&id.slot()) {
                Some(&seen) if seen == id => continue,
                Some(&seen) => {
                    return Err(Error::corruption(
                        &pf.path,
                        pf.offset_of(id),
                        format!(
                            "pages {:#x} and {:#x} both claim slot {}",
                            seen.to_raw(),
                            id.to_raw(),
                            id.slot()
                        ),
                    ));
                }
                None => {}
            }
            // Leaf pages are not read here: an id past the end of its file
            // would otherwise pass, and the allocator would take every slot
            // below it for free (2^40 of them at most).
            let file_len = file_lens[kind_index(id.kind())];
            let fits = page_end_bytes(pf, id).is_some_and(|end| end <= file_len);
            if id.blocks() > pf.geometry.slot_blocks() || !fits {
                let parent = parent.map_or("the superblock".to_string(), |p| {
                    format!("page {:#x}", p.to_raw())
                });
                return Err(Error::corruption(
                    &pf.path,
                    pf.offset_of(id),
                    format!(
                        "{parent} names page id {:#x}, malformed or past the file's {file_len} bytes",
                        id.to_raw()
                    ),
                ));
            }
            slots.insert(id.slot(), id);
            if id.kind() == PageKind::Node {
                let bytes = self.read_whole(id, priority)?;
                let children = list_children(&bytes).map_err(|e| self.content_corruption(id, e))?;
                stack.extend(children.into_iter().map(|child| (child, Some(id))));
            }
        }
        Ok(live)
    }

    /// Builds the allocators from the live set. With `clean_up`, truncates
    /// each file after its last live slot and punches every free leaf slot
    /// (it may hold pages of a checkpoint that never committed, or pages
    /// freed before a crash).
    fn install_live(&self, live: [HashMap<u64, PageId>; 2], clean_up: bool) -> Result<()> {
        let mut alloc = self.alloc.lock();
        for (i, pages) in live.into_iter().enumerate() {
            let pf = &self.files[i];
            let kind = [PageKind::Node, PageKind::Leaf][i];
            let allocator =
                SlotAllocator::with_live(kind, pf.geometry.slot_blocks(), pages.into_values());
            let end = allocator.high_water_slot() * pf.geometry.slot_bytes;
            if !clean_up {
                alloc[i] = allocator;
                continue;
            }
            if pf.file.len()? > end {
                pf.file.set_len(end).map_err(|e| self.poison_with(e))?;
            }
            if i == kind_index(PageKind::Leaf) {
                for slot in allocator.free_slots() {
                    let offset = slot * pf.geometry.slot_bytes;
                    match pf.file.punch_hole(offset, pf.geometry.slot_bytes) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::Unsupported => break,
                        Err(e) => return Err(self.poison_with(e)),
                    }
                }
            }
            alloc[i] = allocator;
        }
        Ok(())
    }
}

/// Where `id`'s last block ends in its file; `None` if that overflows.
fn page_end_bytes(pf: &PageFile, id: PageId) -> Option<u64> {
    let blocks_bytes = u64::from(id.blocks()).checked_mul(pf.geometry.block_bytes as u64)?;
    id.slot()
        .checked_mul(pf.geometry.slot_bytes)?
        .checked_add(blocks_bytes)
}

fn check_options(options: &PageStoreOptions) -> Result<()> {
    let node = options.node_size_bytes;
    let leaf = options.leaf_size_bytes;
    if !node.is_power_of_two() || !(512..=65536).contains(&node) {
        return Err(Error::InvalidOptions(format!(
            "node_size_bytes = {node} must be a power of two in 512..=65536"
        )));
    }
    if !leaf.is_multiple_of(4096) || !(4096..=64 << 20).contains(&leaf) {
        return Err(Error::InvalidOptions(format!(
            "leaf_size_bytes = {leaf} must be a multiple of 4096 in 4 KiB..=64 MiB"
        )));
    }
    if options.direct_io && node < 4096 {
        return Err(Error::InvalidOptions(format!(
            "direct_io needs node_size_bytes >= 4096 (aligned I/O), not {node}"
        )));
    }
    Ok(())
}
