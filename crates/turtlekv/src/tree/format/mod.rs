//! The tree's byte formats: items, leaf pages (which buffer segments share)
//! and node pages (`docs/format.md`), and their in-memory forms. Every page
//! the tree reads is decoded here, and a decoder refuses bytes that break
//! a rule of the format with an error, never a panic: a `DecodeError` at
//! an offset of the page's contents, which the page store turns into the
//! page file's offset (`PageIo::corruption`). Node pages are read by one
//! reader, `node_reader`, for both their full decode and the read path's
//! lookup index.

pub(crate) mod chunk;
pub(crate) mod codec;
pub(crate) mod item;
pub(crate) mod item_layout;
pub(crate) mod leaf;
pub(crate) mod leaf_head;
pub(crate) mod node;
pub(crate) mod node_codec;
pub(crate) mod node_reader;
mod pack;
