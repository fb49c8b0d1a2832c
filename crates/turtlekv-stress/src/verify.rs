//! Checks a reopened database against the expected state: every
//! acknowledged write present, every write in flight either fully applied
//! or not at all (per batch), no stray or malformed data; then settles the
//! writes in flight to what was found, so the next run continues from it.

use std::collections::BTreeMap;

use turtlekv::Db;

use crate::expected::ExpectedState;
use crate::value::{Entry, decode_value, key_id};

/// What a verification found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Keys holding a value.
    pub present: u64,
    /// Writes in flight at the kill that recovery holds.
    pub in_flight_applied: u64,
    /// Writes in flight at the kill that recovery does not hold.
    pub in_flight_lost: u64,
}

/// Verifies `db` against `expected` and, when it matches, resolves the
/// writes in flight. `Err` lists the first problems found.
pub fn verify_and_resolve(db: &Db, expected: &ExpectedState) -> Result<Verified, String> {
    let keys = expected.keys();
    let mut problems = Vec::new();
    let mut found: Vec<Option<u32>> = vec![None; keys as usize];
    for kv in db.range::<&[u8], _>(..) {
        let (k, v) = kv.map_err(|e| format!("scan failed: {e}"))?;
        match key_id(&k).filter(|id| *id < keys) {
            None => problems.push(format!("stray key {k:?}")),
            Some(id) => match decode_value(id, &v) {
                Ok(version) => found[id as usize] = Some(version),
                Err(e) => problems.push(format!("key {id}: {e}")),
            },
        }
    }
    // Point lookups must agree with the scan.
    for id in 0..keys {
        let got = db
            .get(crate::value::key(id))
            .map_err(|e| format!("get of key {id} failed: {e}"))?;
        let version = got.map(|v| decode_value(id, &v)).transpose();
        if version.as_ref().ok() != Some(&found[id as usize]) {
            problems.push(format!(
                "key {id}: get found {version:?}, scan {:?}",
                found[id as usize]
            ));
        }
    }
    // Per batch: may every key be old (not applied), may every key be new?
    let mut batches: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
    let mut verified = Verified::default();
    for id in 0..keys {
        let got = found[id as usize];
        verified.present += u64::from(got.is_some());
        let committed = expected.committed(id);
        match expected.pending(id) {
            None if !committed.matches(got) => problems.push(format!(
                "key {id}: acknowledged {committed:?} but found {got:?}"
            )),
            None => {}
            Some((next, batch)) => {
                let (old, new) = (committed.matches(got), next.matches(got));
                if !old && !new {
                    problems.push(format!(
                        "key {id}: found {got:?}, neither acknowledged {committed:?} nor in-flight {next:?}"
                    ));
                }
                let group = batches.entry(batch).or_insert((true, true));
                group.0 &= old;
                group.1 &= new;
            }
        }
    }
    for (batch, (all_old, all_new)) in &batches {
        if !all_old && !all_new {
            problems.push(format!("batch {batch} is partly applied"));
        }
    }
    if !problems.is_empty() {
        problems.truncate(20);
        return Err(problems.join("\n"));
    }
    for id in 0..keys {
        if let Some((next, _)) = expected.pending(id) {
            let got = found[id as usize];
            let entry = if next.matches(got) {
                verified.in_flight_applied += 1;
                next
            } else {
                verified.in_flight_lost += 1;
                expected.committed(id)
            };
            expected
                .resolve(id, entry)
                .map_err(|e| format!("expected-state file: {e}"))?;
        }
    }
    Ok(verified)
}

/// The entry a key holds after a write of `present` over `current`.
pub fn next_entry(current: Entry, present: bool) -> Entry {
    Entry {
        version: current.version + 1,
        present,
    }
}
