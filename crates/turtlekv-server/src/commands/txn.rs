//! `WATCH`/`MULTI`/`EXEC`/`DISCARD` on the engine's optimistic transactions.
//!
//! `EXEC` runs the queued commands inside one `Transaction` and commits it.
//! A conflict (another client wrote something the commands read, or a
//! checkpoint made the engine's check unsure) does not abort `EXEC`: it runs
//! the commands again in a new transaction, so `MULTI`/`EXEC` without
//! `WATCH` always executes, atomically, as in Redis. `WATCH` remembers each
//! key's value; every attempt first reads the watched keys in its
//! transaction and aborts `EXEC` (a null reply) if one differs, and the
//! commit's check guarantees they did not change between that read and the
//! commit. A watched key rewritten with the value it had is therefore not
//! seen as modified (Redis would abort).

use std::mem;

use bytes::Bytes;
use turtlekv::{Error, Result};

use super::{Call, lookup, run};
use crate::resp::Reply;
use crate::session::{Multi, Session, Watched};
use crate::shared::{Counters, Shared};
use crate::store::Exec;

pub fn multi(c: &mut Call<'_, '_>) -> Result<()> {
    if c.session.multi.is_some() {
        c.reply.error("ERR MULTI calls can not be nested");
    } else {
        c.session.multi = Some(Multi::default());
        c.reply.ok();
    }
    Ok(())
}

pub fn discard(c: &mut Call<'_, '_>) -> Result<()> {
    if c.session.multi.take().is_none() {
        c.reply.error("ERR DISCARD without MULTI");
    } else {
        c.session.watched.clear();
        c.reply.ok();
    }
    Ok(())
}

pub fn watch(c: &mut Call<'_, '_>) -> Result<()> {
    if c.session.multi.is_some() {
        c.reply.error("ERR WATCH inside MULTI is not allowed");
        return Ok(());
    }
    for key in &c.args[1..] {
        let value = c.exec.get(&c.session.space, key)?;
        c.session.watched.push(Watched {
            space: c.session.space.clone(),
            key: key.clone(),
            value,
        });
    }
    c.reply.ok();
    Ok(())
}

pub fn unwatch(c: &mut Call<'_, '_>) -> Result<()> {
    c.session.watched.clear();
    c.reply.ok();
    Ok(())
}

pub fn exec(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(multi) = c.session.multi.take() else {
        c.reply.error("ERR EXEC without MULTI");
        return Ok(());
    };
    let watched = mem::take(&mut c.session.watched);
    if multi.dirty {
        c.reply
            .error("EXECABORT Transaction discarded because of previous errors.");
        return Ok(());
    }
    match run_atomically(c.shared, c.session, &multi.queued, &watched)? {
        Some(replies) => {
            c.reply.array(multi.queued.len());
            c.reply.out.extend_from_slice(&replies);
        }
        None => {
            Counters::bump(&c.shared.counters.exec_aborts);
            c.reply.null_array();
        }
    }
    Ok(())
}

/// Runs `requests` (known commands, arity checked) in one transaction and
/// commits it, running them again in a new one after a conflict; returns
/// their replies, or `None` if a `watched` key no longer has its value.
pub fn run_atomically(
    shared: &Shared,
    session: &mut Session,
    requests: &[Vec<Bytes>],
    watched: &[Watched],
) -> Result<Option<Vec<u8>>> {
    // SELECT inside MULTI changes the database for the commands after it;
    // an attempt that is retried starts again from the one it began in.
    let (db_index, space) = (session.db_index, session.space.clone());
    loop {
        let mut txn = shared.db.transaction();
        for w in watched {
            if w.space.txn_get(&txn, &w.key)? != w.value {
                return Ok(None);
            }
        }
        let mut replies = Reply::new(session.protocol);
        {
            let mut exec = Exec::Txn {
                db: &shared.db,
                txn: &mut txn,
            };
            for args in requests {
                let spec = lookup(&args[0]).expect("only known commands run here");
                run(shared, session, &mut replies, &mut exec, spec, args);
            }
        }
        match txn.commit(&shared.write) {
            Ok(()) => return Ok(Some(replies.out)),
            Err(Error::Conflict(_)) => {
                Counters::bump(&shared.counters.txn_retries);
                session.db_index = db_index;
                session.space = space.clone();
            }
            Err(e) => return Err(e),
        }
    }
}
