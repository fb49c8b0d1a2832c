//! Random WAL histories against crashes of every kind (a kill, a power
//! cut in each `CrashMode`, a failing reopen): the log as `Db` drives it,
//! checked against the history it was given.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::WriteBatch;
use crate::io::SplitMix;
use crate::io::{CrashMode, Fault, FaultFs, FileSystem};
use crate::wal::binding::LogBinding;
use crate::wal::log::Wal;
use crate::wal::replay::ReplayOutcome;

const DIR: &str = "/db/wal";

/// The file system's own generator, with a bound.
struct Rng(SplitMix);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type Seen = Vec<(u64, Vec<u8>)>;

/// Opens the log as `Db` would with a superblock naming `floor` as its
/// WAL floor (`docs/format.md`, "Superblock").
fn try_open(
    fs: &FaultFs,
    covered: u64,
    floor: u64,
    seg: u64,
) -> crate::Result<(Wal, ReplayOutcome, Seen)> {
    let mut seen = Vec::new();
    let binding = LogBinding {
        floor,
        ..LogBinding::new(1)
    };
    let (wal, outcome) = Wal::open(
        Arc::new(fs.clone()),
        Path::new(DIR),
        covered,
        &binding,
        seg,
        &mut |first, ops| {
            for (i, op) in ops.iter().enumerate() {
                seen.push((first + i as u64, op.key.to_vec()));
            }
            Ok(())
        },
    )?;
    Ok((wal, outcome, seen))
}

fn crash_mode(rng: &mut Rng) -> CrashMode {
    match rng.below(3) {
        0 => CrashMode::DropUnsynced,
        1 => CrashMode::KeepRandomSubset { seed: rng.next() },
        _ => CrashMode::TearLastWrite { seed: rng.next() },
    }
}

/// One random history: phases of writes, syncs, rotations and
/// checkpoints, each ended by a kill, a power cut or a close, some
/// opens failing part way (and followed by a power cut).
fn fuzz_once(seed: u64) -> std::result::Result<(), String> {
    let mut rng = Rng(SplitMix(seed));
    let mut fs = FaultFs::new();
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let mut covered = 0u64;
    // The superblock's WAL floor: the segment the last successful open
    // started, or the one the last checkpoint replays from, whichever is
    // newer. A crash never leaves it missing.
    let mut floor = 0u64;
    let mut durable = 0u64;
    let mut history: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut uid = 0u64;
    let seg_size = [300u64, 2_000, 1 << 20][rng.below(3) as usize];
    let mut log = String::new();
    for phase in 0..5 {
        // Sometimes a crash during the open itself, then a power cut.
        if phase > 0 && rng.below(3) == 0 {
            let after = rng.below(10);
            fs.inject(Fault::crash_after(after));
            let r = try_open(&fs, covered, floor, seg_size).map(|_| ());
            let mode = crash_mode(&mut rng);
            log += &format!(
                "faulty open after {after}: {:?}; crash {mode:?}\n",
                r.is_ok()
            );
            fs = fs.crash(mode);
        }
        let (mut wal, outcome, seen) = try_open(&fs, covered, floor, seg_size)
            .map_err(|e| format!("{log}phase {phase}: open failed: {e}"))?;
        // The open's commit of its new segment as the floor.
        floor = floor.max(wal.current_segment_id());
        let last = seen.last().map_or(covered, |s| s.0);
        let expect: Vec<(u64, Vec<u8>)> = history
            .iter()
            .filter(|(s, _)| **s > covered && **s <= last)
            .map(|(s, k)| (*s, k.clone()))
            .collect();
        if seen != expect {
            return Err(format!(
                "{log}phase {phase}: seen {seen:?}\n expected {expect:?}"
            ));
        }
        if last < durable {
            return Err(format!(
                "{log}phase {phase}: lost durable records: last {last} < durable {durable}"
            ));
        }
        history.retain(|s, _| *s <= last);
        durable = last;
        wal.verification()
            .unwrap()
            .verify()
            .map_err(|e| format!("{log}phase {phase}: check failed: {e}"))?;
        log += &format!(
            "open: last {last}, dropped {}\n",
            outcome.tail_bytes_dropped
        );
        let mut boundaries = Vec::new();
        for _ in 0..rng.below(30) {
            match rng.below(20) {
                0..=10 => {
                    let sync = rng.below(5) == 0;
                    let mut batches = Vec::new();
                    for _ in 0..1 + rng.below(2) {
                        let mut b = WriteBatch::new();
                        for _ in 0..1 + rng.below(3) {
                            uid += 1;
                            b.put(format!("u{uid}"), vec![b'x'; rng.below(120) as usize]);
                        }
                        batches.push(b);
                    }
                    let first = wal.append_group(batches.iter(), sync).unwrap();
                    let mut s = first;
                    for b in &batches {
                        for op in &b.ops {
                            history.insert(s, op.key.to_vec());
                            s += 1;
                        }
                    }
                    if sync {
                        durable = wal.next_seq() - 1;
                    }
                    log += &format!("append {first}..{} sync {sync}\n", wal.next_seq());
                }
                11..=14 => {
                    wal.rotate().unwrap();
                    boundaries.push((wal.next_seq(), wal.current_segment_id()));
                    log += &format!("rotate at {}\n", wal.next_seq());
                }
                15..=16 => {
                    wal.sync().unwrap();
                    durable = wal.next_seq() - 1;
                    log += "flush\n";
                }
                _ => {
                    // A checkpoint of a frozen MemTable: up to a rotation.
                    let candidates: Vec<(u64, u64)> = boundaries
                        .iter()
                        .copied()
                        .filter(|(b, _)| b - 1 > covered)
                        .collect();
                    if let Some(&(b, replay_from)) = candidates.first() {
                        covered = b - 1;
                        floor = floor.max(replay_from);
                        durable = durable.max(covered);
                        let detached = wal.detach_covered(covered);
                        // Sometimes as if the crash came before the
                        // directory sync: the removed segments come back.
                        if rng.below(2) == 0 {
                            detached.remove().unwrap();
                        } else {
                            detached.remove_unsynced().unwrap();
                        }
                        log += &format!("checkpoint {covered}\n");
                    }
                }
            }
        }
        match rng.below(4) {
            0 => {
                drop(wal);
                fs = fs.kill();
                log += "kill\n";
            }
            1 => {
                wal.seal().unwrap();
                durable = wal.next_seq() - 1;
                drop(wal);
                let mode = crash_mode(&mut rng);
                fs = fs.crash(mode);
                log += &format!("close, crash {mode:?}\n");
            }
            _ => {
                drop(wal);
                let mode = crash_mode(&mut rng);
                fs = fs.crash(mode);
                log += &format!("crash {mode:?}\n");
            }
        }
    }
    let (_, _, seen) = try_open(&fs, covered, floor, seg_size)
        .map_err(|e| format!("{log}final open failed: {e}"))?;
    let last = seen.last().map_or(covered, |s| s.0);
    if last < durable {
        return Err(format!(
            "{log}final: lost durable records: last {last} < durable {durable}"
        ));
    }
    Ok(())
}

/// Random histories of appends (synced or not), `flush_wal`, rotations
/// (also of full segments, at 300 B or 2 KB) and checkpoint trims (half of
/// them with the removals left for a crash to undo), each
/// phase ended by a kill, a power cut in any mode, or a close then a power
/// cut; some reopens fail part way through on a persistent EIO and take a
/// second power cut. Every reopen must replay a prefix of the history,
/// lose nothing made durable, and pass the WAL check; each is opened with
/// the WAL floor a superblock would name, and the links rotations write,
/// so a state crashes reach that replay took for a missing segment fails.
/// It attacks the unsynced rotations; `TURTLEKV_WAL_HISTORY_SEEDS` sets
/// the count of seeds (5,000 by default; 40,000 pass).
#[test]
fn random_histories_recover_a_prefix_with_every_durable_record() {
    let n: u64 = std::env::var("TURTLEKV_WAL_HISTORY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let mut failures = Vec::new();
    for seed in 0..n {
        if let Err(e) = fuzz_once(seed) {
            failures.push((seed, e));
        }
    }
    if let Some((seed, e)) = failures.first() {
        panic!(
            "{} of {n} seeds failed; first, seed {seed}:\n{e}",
            failures.len()
        );
    }
}
