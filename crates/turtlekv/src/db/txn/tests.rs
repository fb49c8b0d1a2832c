//! Transactions through the public API: isolation, conflicts of keys and
//! ranges, atomic commits across keyspaces, and concurrent use (a bank
//! whose total never changes, increments that are never lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::db::checkpointing_test_options;
use crate::io::FaultFs;
use crate::{Db, Error, Options, WriteOptions};

fn open_with(options: Options) -> Db {
    Db::open_with_fs("/db", options, Arc::new(FaultFs::new())).unwrap()
}

/// MemTables large enough that no checkpoint runs during a test's
/// transactions, unless it asks for one.
fn roomy() -> Options {
    Options {
        checkpoint_distance_bytes: 8 << 20,
        cache_capacity_bytes: 64 << 20,
        ..checkpointing_test_options()
    }
}

fn sync() -> WriteOptions {
    WriteOptions::new().sync(true)
}

#[test]
fn reads_see_the_start_plus_own_writes_and_commit_applies_all_at_once() {
    let db = open_with(roomy());
    db.put("a", "1").unwrap();
    db.put("c", "3").unwrap();
    let mut txn = db.transaction();
    db.put("b", "outside").unwrap();
    assert_eq!(txn.get("b").unwrap(), None, "written after the start");
    txn.put("b", "2");
    txn.delete("c");
    txn.put("d", "4");
    assert_eq!(txn.get("b").unwrap().unwrap(), "2");
    assert_eq!(txn.get("c").unwrap(), None);
    let seen: Vec<_> = txn.range::<&[u8], _>(..).map(|kv| kv.unwrap()).collect();
    let seen: Vec<_> = seen.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    assert_eq!(seen, [(&b"a"[..], &b"1"[..]), (b"b", b"2"), (b"d", b"4")]);
    assert_eq!(db.get("d").unwrap(), None, "nothing before the commit");
    // `b` was written by someone else after the start: a conflict.
    assert!(matches!(txn.commit(&sync()), Err(Error::Conflict(_))));
    assert_eq!(db.get("d").unwrap(), None);
    assert_eq!(db.get("c").unwrap().unwrap(), "3");

    let mut txn = db.transaction();
    txn.put("b", "2");
    txn.delete("c");
    txn.put("d", "4");
    txn.commit(&sync()).unwrap();
    let all: Vec<_> = db.range::<&[u8], _>(..).map(|kv| kv.unwrap().0).collect();
    assert_eq!(all, [&b"a"[..], b"b", b"d"]);
}

#[test]
fn a_key_read_and_changed_since_conflicts_and_one_not_read_does_not() {
    let db = open_with(roomy());
    db.put("x", "0").unwrap();
    let mut reader = db.transaction();
    assert_eq!(reader.get("x").unwrap().unwrap(), "0");
    reader.put("y", "from reader");
    db.put("x", "1").unwrap();
    assert!(matches!(reader.commit(&sync()), Err(Error::Conflict(_))));
    assert_eq!(db.get("y").unwrap(), None);

    let mut blind = db.transaction();
    blind.put("z", "mine");
    db.put("unrelated", "1").unwrap();
    blind.commit(&sync()).unwrap();
    assert_eq!(db.get("z").unwrap().unwrap(), "mine");

    // Two writers of one key: the second to commit conflicts.
    let mut first = db.transaction();
    let mut second = db.transaction();
    first.put("w", "first");
    second.put("w", "second");
    first.commit(&sync()).unwrap();
    assert!(matches!(second.commit(&sync()), Err(Error::Conflict(_))));
    assert_eq!(db.get("w").unwrap().unwrap(), "first");

    // A read-only transaction always commits.
    let reader = db.transaction();
    reader.get("w").unwrap();
    db.put("w", "again").unwrap();
    reader.commit(&sync()).unwrap();
}

#[test]
fn a_range_read_conflicts_with_inserts_into_the_part_that_was_read() {
    let db = open_with(roomy());
    for k in ["b", "d", "f", "h"] {
        db.put(k, "v").unwrap();
    }
    // Read all of [c, g): an insert at e conflicts, one at a does not.
    let mut txn = db.transaction();
    assert_eq!(txn.range(b"c".as_slice()..b"g").count(), 2);
    txn.put("sum", "2");
    db.put("a", "outside").unwrap();
    db.put("e", "phantom").unwrap();
    assert!(matches!(txn.commit(&sync()), Err(Error::Conflict(_))));

    // Read only the first key of [a, ..): later inserts past it are fine.
    let mut txn = db.transaction();
    let first = txn.range::<&[u8], _>(..).next().unwrap().unwrap().0;
    assert_eq!(first, "a");
    txn.put("first", first);
    db.put("zz", "after what was read").unwrap();
    txn.commit(&sync()).unwrap();

    let mut txn = db.transaction();
    assert_eq!(txn.prefix("a").count(), 1);
    txn.put("n", "1");
    db.put("ab", "in the prefix").unwrap();
    assert!(matches!(txn.commit(&sync()), Err(Error::Conflict(_))));
}

#[test]
fn a_checkpoint_since_the_start_makes_a_commit_that_read_conflict() {
    let db = open_with(roomy());
    db.put("x", "0").unwrap();
    let mut txn = db.transaction();
    txn.get("x").unwrap();
    txn.put("x", "1");
    db.put("other", "1").unwrap();
    db.checkpoint_now().unwrap();
    let Err(Error::Conflict(reason)) = txn.commit(&sync()) else {
        panic!("a checkpoint since the start must be a conflict");
    };
    assert!(reason.contains("checkpoint"), "{reason}");
    assert_eq!(db.get("x").unwrap().unwrap(), "0");
}

#[test]
fn transactions_span_keyspaces_and_refuse_dropped_ones() {
    let db = open_with(roomy());
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    a.put("k", "a0").unwrap();
    let mut txn = db.transaction();
    assert_eq!(txn.get_in(&a, "k").unwrap().unwrap(), "a0");
    assert_eq!(txn.get("k").unwrap(), None, "the default keyspace is apart");
    txn.put_in(&b, "k", "b1");
    txn.delete_in(&a, "k");
    let seen: Vec<_> = txn
        .range_in(&b, ..b"z".as_slice())
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(seen, [&b"k"[..]]);
    txn.commit(&sync()).unwrap();
    assert_eq!(a.get("k").unwrap(), None);
    assert_eq!(b.get("k").unwrap().unwrap(), "b1");

    let mut txn = db.transaction();
    txn.put_in(&b, "k", "b2");
    db.drop_keyspace("b").unwrap();
    assert!(matches!(
        txn.commit(&sync()),
        Err(Error::KeyspaceDropped(_))
    ));
    assert!(matches!(
        db.transaction().get_in(&b, "k"),
        Err(Error::KeyspaceDropped(_))
    ));
}

#[test]
fn compare_and_swap_and_update_and_fetch() {
    let db = open_with(roomy());
    assert_eq!(db.compare_and_swap("k", None, Some(b"1")).unwrap(), Ok(()));
    let failed = db
        .compare_and_swap("k", None, Some(b"2"))
        .unwrap()
        .unwrap_err();
    assert_eq!(failed.current.as_deref(), Some(&b"1"[..]));
    assert_eq!(failed.proposed.as_deref(), Some(&b"2"[..]));
    assert_eq!(db.compare_and_swap("k", Some(b"1"), None).unwrap(), Ok(()));
    assert_eq!(db.get("k").unwrap(), None);
    let new = db
        .update_and_fetch("n", |old| Some(vec![old.map_or(0, |v| v[0]) + 5]))
        .unwrap();
    assert_eq!(new.as_deref(), Some(&[5u8][..]));
    assert_eq!(db.update_and_fetch("n", |_| None).unwrap(), None);
    assert_eq!(db.get("n").unwrap(), None);
    assert!(matches!(
        db.compare_and_swap("", None, None),
        Err(Error::EmptyKey)
    ));
}

/// Threads move money between accounts in transactions, retrying on
/// conflict, while checkpoints run; readers check through snapshots that
/// the total never changes. A lost update or a torn read fails it.
#[test]
fn a_bank_keeps_its_total_under_concurrent_transfers() {
    const ACCOUNTS: u64 = 20;
    const START: u64 = 1_000;
    const TRANSFERS_PER_THREAD: u64 = 2_000;
    let db = open_with(Options {
        checkpoint_distance_bytes: 64 * 1024,
        ..roomy()
    });
    let account = |i: u64| format!("acct{i:02}");
    for i in 0..ACCOUNTS {
        db.put(account(i), START.to_be_bytes()).unwrap();
    }
    let balance = |v: Option<bytes::Bytes>| u64::from_be_bytes(v.unwrap()[..].try_into().unwrap());
    let done = AtomicBool::new(false);
    let conflicts = AtomicU64::new(0);
    std::thread::scope(|s| {
        let mut writers = Vec::new();
        for t in 0..3u64 {
            let (db, conflicts) = (&db, &conflicts);
            writers.push(s.spawn(move || {
                let mut seed = t + 1;
                for _ in 0..TRANSFERS_PER_THREAD {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (from, to) = ((seed >> 33) % ACCOUNTS, (seed >> 17) % ACCOUNTS);
                    let amount = (seed >> 50) % 50;
                    loop {
                        let mut txn = db.transaction();
                        let a = balance(txn.get(account(from)).unwrap());
                        let b = balance(txn.get(account(to)).unwrap());
                        if from == to || a < amount {
                            break;
                        }
                        txn.put(account(from), (a - amount).to_be_bytes());
                        txn.put(account(to), (b + amount).to_be_bytes());
                        // Filler, so that checkpoints come often.
                        txn.put(format!("log{seed:020}"), [0u8; 100]);
                        match txn.commit(&WriteOptions::default()) {
                            Ok(()) => break,
                            Err(Error::Conflict(_)) => conflicts.fetch_add(1, Ordering::Relaxed),
                            Err(e) => panic!("{e}"),
                        };
                    }
                }
            }));
        }
        let (db, done) = (&db, &done);
        s.spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let snapshot = db.snapshot();
                let total: u64 = snapshot
                    .prefix("acct")
                    .map(|kv| u64::from_be_bytes(kv.unwrap().1[..].try_into().unwrap()))
                    .sum();
                assert_eq!(total, ACCOUNTS * START, "a torn or lost transfer");
                let mut txn = db.transaction();
                let total: u64 = (0..ACCOUNTS)
                    .map(|i| balance(txn.get(account(i)).unwrap()))
                    .sum();
                assert_eq!(
                    total,
                    ACCOUNTS * START,
                    "a transaction's reads are of one point"
                );
                txn.put("audit", total.to_be_bytes());
                let _ = txn.commit(&WriteOptions::default());
            }
        });
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let total: u64 = (0..ACCOUNTS)
        .map(|i| balance(db.get(account(i)).unwrap()))
        .sum();
    assert_eq!(total, ACCOUNTS * START);
    assert!(db.stats().checkpoints > 0, "checkpoints ran meanwhile");
    eprintln!("{} conflicts", conflicts.load(Ordering::Relaxed));
}

/// `update_and_fetch` increments from many threads: none is lost.
#[test]
fn increments_from_many_threads_are_never_lost() {
    const THREADS: u64 = 4;
    const INCREMENTS: u64 = 500;
    let db = open_with(Options {
        checkpoint_distance_bytes: 64 * 1024,
        ..roomy()
    });
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let db = &db;
            s.spawn(move || {
                for i in 0..INCREMENTS {
                    db.update_and_fetch("counter", |old| {
                        let n = old.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                        Some((n + 1).to_be_bytes().to_vec())
                    })
                    .unwrap();
                    // Other writes, so that checkpoints run meanwhile.
                    db.put(format!("noise{t}-{i}"), [1u8; 200]).unwrap();
                }
            });
        }
    });
    let count = u64::from_be_bytes(db.get("counter").unwrap().unwrap()[..].try_into().unwrap());
    assert_eq!(count, THREADS * INCREMENTS);
    assert!(db.stats().checkpoints > 0);
}
