//! `checkpoint`: MemTable into the tree, now.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::cli::CheckpointArgs;
use crate::db::{Create, open};

pub fn checkpoint(args: &CheckpointArgs, out: &mut dyn Write) -> Result<()> {
    let db = open(&args.db, Create::No)?;
    let started = Instant::now();
    db.checkpoint_now().context("checkpoint")?;
    let stats = db.stats();
    writeln!(
        out,
        "checkpointed {} in {:.3} s: the tree covers sequence numbers up to {}; height {}, \
         {} node, {} leaf and {} buffer segment pages",
        args.db.display(),
        started.elapsed().as_secs_f64(),
        stats.checkpoint_covered_sequence,
        stats.tree_height,
        stats.tree_node_pages,
        stats.tree_leaf_pages,
        stats.tree_segment_pages,
    )?;
    Ok(())
}
