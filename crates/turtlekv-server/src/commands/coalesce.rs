//! Pipelined plain `SET`s written as one batch, pipelined `GET`s read with
//! one `multi_get` (one read view; the reads that miss the cache go to the
//! device together), and pipelined counters (`INCR` and its kin, `APPEND`)
//! run in one transaction.
//!
//! A pipeline of `SET key value` requests (no options) would otherwise go
//! through the engine's group commit one by one, each waiting for its own
//! leader turn. Consecutive ones are written as one `WriteBatch` instead:
//! each still gets its own reply (an invalid key or value is refused alone,
//! before the batch is written), the batch is atomic, which is more than
//! the client asked for, and the order of writes to a key is kept.

use bytes::Bytes;
use turtlekv::WriteBatch;

use super::txn::run_atomically;
use super::{engine_error, is, lookup};
use crate::resp::Reply;
use crate::session::Session;
use crate::shared::{Counters, Shared};

/// Most key and value bytes one coalesced batch carries, well below the
/// engine's largest log record.
const MAX_RUN_BYTES: usize = 1024 * 1024;

fn is_plain_set(request: &[Bytes]) -> bool {
    request.len() == 3 && is(&request[0], "SET")
}

/// How many requests from the start of `requests` can be written as one
/// batch: plain `SET`s, on a session that may run them now (authenticated,
/// not queueing for `MULTI`). Fewer than two is not worth a batch.
pub fn set_run_len(session: &Session, requests: &[Vec<Bytes>]) -> usize {
    if !session.authenticated || session.multi.is_some() {
        return 0;
    }
    let mut bytes = 0;
    let n = requests
        .iter()
        .take_while(|r| {
            bytes += r.iter().skip(1).map(Bytes::len).sum::<usize>();
            is_plain_set(r) && bytes <= MAX_RUN_BYTES
        })
        .count();
    if n >= 2 { n } else { 0 }
}

/// Writes a run of plain `SET`s (`set_run_len` long) and replies to each.
pub fn run_sets(shared: &Shared, session: &mut Session, reply: &mut Reply, run: &[Vec<Bytes>]) {
    let space = &session.space;
    let mut batch = WriteBatch::new();
    let mut refused: Vec<Option<String>> = Vec::with_capacity(run.len());
    for request in run {
        Counters::bump(&shared.counters.commands);
        match shared.db.check_entry(&request[1], Some(&request[2])) {
            Ok(()) => {
                space.batch_put(&mut batch, &request[1], &request[2]);
                refused.push(None);
            }
            Err(e) => refused.push(Some(engine_error(&e))),
        }
    }
    let written = if batch.is_empty() {
        Ok(())
    } else {
        shared.db.write(batch, &shared.write)
    };
    session.wrote = true;
    for refusal in refused {
        match (&refusal, &written) {
            (Some(message), _) => reply.error(message),
            (None, Ok(())) => reply.ok(),
            (None, Err(e)) => reply.error(&engine_error(e)),
        }
    }
}

/// Commands whose consecutive runs share one transaction: each is a
/// read-modify-write of one key that would otherwise commit alone.
fn is_counter(request: &[Bytes]) -> bool {
    ["INCR", "DECR", "INCRBY", "DECRBY", "APPEND"]
        .iter()
        .any(|name| is(&request[0], name))
        && lookup(&request[0]).is_some_and(|spec| spec.arity_ok(request.len()))
}

/// How many requests from the start of `requests` are counters that can
/// run as one transaction (0 if fewer than two).
pub fn counter_run_len(session: &Session, requests: &[Vec<Bytes>]) -> usize {
    if !session.authenticated || session.multi.is_some() {
        return 0;
    }
    let n = requests
        .iter()
        .take(MAX_COUNTER_RUN)
        .take_while(|r| is_counter(r))
        .count();
    if n >= 2 { n } else { 0 }
}

/// Most counters in one transaction: a conflict reruns all of them.
const MAX_COUNTER_RUN: usize = 64;

/// Runs a run of counters in one transaction (retried whole on a
/// conflict, so each still behaves atomically, and the run as a whole
/// too) and replies to each.
pub fn run_counters(shared: &Shared, session: &mut Session, reply: &mut Reply, run: &[Vec<Bytes>]) {
    for _ in run {
        Counters::bump(&shared.counters.commands);
    }
    session.wrote = true;
    match run_atomically(shared, session, run, &[]) {
        Ok(Some(replies)) => reply.out.extend_from_slice(&replies),
        // No key is watched: the run cannot abort.
        Ok(None) => unreachable!("a run without watched keys aborted"),
        Err(e) => {
            for _ in run {
                reply.error(&engine_error(&e));
            }
        }
    }
}

/// Most `GET`s read with one `multi_get`.
const MAX_GET_RUN: usize = 256;

/// How many requests from the start of `requests` are plain `GET`s that
/// can be read together (0 if fewer than two).
pub fn get_run_len(session: &Session, requests: &[Vec<Bytes>]) -> usize {
    if !session.authenticated || session.multi.is_some() {
        return 0;
    }
    let n = requests
        .iter()
        .take(MAX_GET_RUN)
        .take_while(|r| r.len() == 2 && is(&r[0], "GET"))
        .count();
    if n >= 2 { n } else { 0 }
}

/// Reads a run of `GET`s at one point in time and replies to each; an
/// invalid key gets its own error.
pub fn run_gets(shared: &Shared, session: &Session, reply: &mut Reply, run: &[Vec<Bytes>]) {
    let mut keys = Vec::with_capacity(run.len());
    let mut refused: Vec<Option<String>> = Vec::with_capacity(run.len());
    for request in run {
        Counters::bump(&shared.counters.commands);
        match shared.db.check_entry(&request[1], None) {
            Ok(()) => {
                keys.push(request[1].clone());
                refused.push(None);
            }
            Err(e) => refused.push(Some(engine_error(&e))),
        }
    }
    let values = session.space.multi_get(&shared.db, &keys);
    let mut found = values.as_ref().map(|v| v.iter());
    for refusal in refused {
        match (refusal, &mut found) {
            (Some(message), _) => reply.error(&message),
            (None, Ok(values)) => {
                let value = values.next().expect("one value per key");
                reply.bulk_or_null(value.as_deref());
            }
            (None, Err(e)) => reply.error(&engine_error(e)),
        }
    }
}
