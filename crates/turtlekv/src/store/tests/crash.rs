//! Crash at every write and every sync of a run of checkpoint commits, in
//! every crash mode; the reopened store must hold exactly the last
//! acknowledged commit or the one in flight, with every page intact.

use super::harness::{Version, list_children, open, record, small_options};
use crate::io::{CrashMode, Fault, FaultFs};
use crate::store::superblock::SuperblockRecord;
use crate::{Error, Result};

const COMMITS: u64 = 4;

/// What the scenario got acknowledged before the injected failure.
#[derive(Debug, Default)]
struct Outcome {
    /// Versions acknowledged by `commit`, oldest first (index 0: empty tree).
    acked: Vec<(SuperblockRecord, Option<Version>)>,
    /// The version whose commit was under way when the failure hit.
    in_flight: Option<(SuperblockRecord, Version)>,
}

/// Opens, then commits `COMMITS` versions; each replaces two leaves of the
/// previous one (freeing them and the old root) and adds one.
fn scenario(fs: &FaultFs, out: &mut Outcome) -> Result<()> {
    let (store, rec) = open(fs, &small_options())?;
    out.acked.push((rec, None));
    let mut current: Option<Version> = None;
    for n in 1..=COMMITS {
        let (next, freed) = next_version(&store, current.as_ref(), n)?;
        let rec = record(Some(next.root), n);
        out.in_flight = Some((rec, next.clone()));
        store.commit(rec, &freed)?;
        out.in_flight = None;
        out.acked.push((rec, Some(next.clone())));
        current = Some(next);
    }
    Ok(())
}

fn next_version(
    store: &crate::page::PageStore,
    previous: Option<&Version>,
    n: u64,
) -> Result<(Version, Vec<crate::page::PageId>)> {
    let mut leaves = previous.map_or_else(Vec::new, |v| v.leaves.clone());
    let mut freed: Vec<_> = previous.map(|v| v.root).into_iter().collect();
    for k in 0..2.min(leaves.len()) {
        freed.push(leaves[k].0);
        leaves[k] = Version::new_leaf(store, n * 100 + k as u64, 5000 + 3000 * k)?;
    }
    leaves.push(Version::new_leaf(store, n * 100 + 50, 9000)?);
    Ok((Version::write(store, leaves)?, freed))
}

fn check_recovered(crashed: &FaultFs, out: &Outcome, what: &str) {
    let (store, rec) = open(crashed, &small_options()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let last_acked = out.acked.last().map(|(r, v)| (*r, v.clone()));
    let candidates: Vec<(SuperblockRecord, Option<Version>)> = last_acked
        .into_iter()
        .chain(out.in_flight.clone().map(|(r, v)| (r, Some(v))))
        .collect();
    let found = match candidates.iter().find(|(r, _)| *r == rec) {
        Some(found) => found,
        // Before the first acknowledged open, only the empty tree may exist.
        None if out.acked.is_empty() && rec == SuperblockRecord::default() => {
            store.check(&store.pin(), &list_children).unwrap();
            return;
        }
        None => panic!("{what}: recovered {rec:?}, expected one of {candidates:?}"),
    };
    if let Some(version) = &found.1 {
        version
            .verify(&store)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    store
        .check(&store.pin(), &list_children)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[test]
fn crash_at_every_write_and_sync_recovers_a_committed_root() {
    let clean = FaultFs::new();
    scenario(&clean, &mut Outcome::default()).unwrap();
    let (writes, syncs) = clean.op_counts();
    let total_ops = writes + syncs;
    assert!(total_ops > 30, "{total_ops} operations");
    for after in 0..=total_ops {
        let fs = FaultFs::new();
        fs.inject(Fault::crash_after(after));
        let mut out = Outcome::default();
        let result = scenario(&fs, &mut out);
        if after < total_ops {
            assert!(
                matches!(result, Err(Error::Io(_) | Error::Poisoned { .. })),
                "op {after}: {result:?}"
            );
        }
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomSubset { seed: after },
            CrashMode::TearLastWrite { seed: after },
        ] {
            check_recovered(
                &fs.crash(mode),
                &out,
                &format!("crash after op {after}, {mode:?}"),
            );
        }
    }
}

#[test]
fn a_store_reopened_after_a_crash_keeps_committing() {
    let fs = FaultFs::new();
    let mut out = Outcome::default();
    scenario(&fs, &mut out).unwrap();
    let crashed = fs.crash(CrashMode::TearLastWrite { seed: 7 });
    let (store, rec) = open(&crashed, &small_options()).unwrap();
    let last = out.acked.last().unwrap().1.clone().unwrap();
    assert_eq!(rec.root, Some(last.root));
    let (next, freed) = next_version(&store, Some(&last), 9).unwrap();
    store.commit(record(Some(next.root), 9), &freed).unwrap();
    let (store, rec) = open(&crashed.crash(CrashMode::DropUnsynced), &small_options()).unwrap();
    assert_eq!(rec.root, Some(next.root));
    next.verify(&store).unwrap();
    store.check(&store.pin(), &list_children).unwrap();
}
