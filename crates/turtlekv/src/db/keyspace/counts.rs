//! Per-keyspace write counts of one batch, recorded once it committed.

use std::sync::Arc;

use super::core::KeyspaceCore;
use crate::WriteBatch;

/// A batch's puts and deletes per keyspace.
#[derive(Debug)]
pub(crate) struct BatchCounts<'a> {
    default: &'a KeyspaceCore,
    default_counts: (u64, u64),
    named: Vec<(Arc<KeyspaceCore>, u64, u64)>,
}

impl<'a> BatchCounts<'a> {
    pub fn of(batch: &WriteBatch, default: &'a KeyspaceCore) -> Self {
        let mut counts = BatchCounts {
            default,
            default_counts: (0, 0),
            named: Vec::new(),
        };
        if batch.keyspaces.is_empty() {
            counts.default_counts = batch.puts_and_deletes();
            return counts;
        }
        counts.named = batch
            .keyspaces
            .iter()
            .map(|k| (k.core().clone(), 0, 0))
            .collect();
        for op in &batch.ops {
            let tag = &op.key[..usize::from(op.tag_len)];
            let slot = counts
                .named
                .iter_mut()
                .find(|(core, ..)| core.tag.as_bytes() == tag)
                .map(|(_, puts, deletes)| (puts, deletes));
            let (puts, deletes) = match slot {
                Some(slot) => slot,
                None => (&mut counts.default_counts.0, &mut counts.default_counts.1),
            };
            *if op.value.is_some() { puts } else { deletes } += 1;
        }
        counts
    }

    pub fn record(&self) {
        let (puts, deletes) = self.default_counts;
        if puts + deletes > 0 {
            self.default.count_writes(puts, deletes);
        }
        for (core, puts, deletes) in &self.named {
            core.count_writes(*puts, *deletes);
        }
    }
}
