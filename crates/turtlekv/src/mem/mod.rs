//! Memory the engine takes straight from the kernel, and gives back to it:
//! anonymous mappings (MemTable arena chunks, page copies in the page
//! cache), the pool that keeps them for reuse, and handing the C
//! allocator's free pages back after a checkpoint.

mod heap;
mod mapping;
mod mapping_pool;

#[cfg(all(test, target_os = "linux"))]
pub(crate) use heap::process_status_bytes;
pub(crate) use heap::release_free_heap_memory;
pub(crate) use mapping::{Mapping, mapping_bytes, page_bytes};
pub(crate) use mapping_pool::MappingPool;
