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

use turtlekv::{Error, Result};

use super::{Call, lookup, run};
use crate::resp::Reply;
use crate::session::{Multi, Watched};
use crate::shared::Counters;
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
    let shared = c.shared;
    // SELECT inside MULTI changes the database for the commands after it;
    // an attempt that is retried starts again from the one EXEC began in.
    let (db_index, space) = (c.session.db_index, c.session.space.clone());
    loop {
        let mut txn = shared.db.transaction();
        for w in &watched {
            if w.space.txn_get(&txn, &w.key)? != w.value {
                Counters::bump(&shared.counters.exec_aborts);
                c.reply.null_array();
                return Ok(());
            }
        }
        let mut replies = Reply::new(c.session.protocol);
        {
            let mut exec = Exec::Txn {
                db: &shared.db,
                txn: &mut txn,
            };
            for args in &multi.queued {
                let spec = lookup(&args[0]).expect("only known commands are queued");
                run(shared, c.session, &mut replies, &mut exec, spec, args);
            }
        }
        match txn.commit(&shared.write) {
            Ok(()) => {
                c.reply.array(multi.queued.len());
                c.reply.out.extend_from_slice(&replies.out);
                return Ok(());
            }
            Err(Error::Conflict(_)) => {
                Counters::bump(&shared.counters.txn_retries);
                c.session.db_index = db_index;
                c.session.space = space.clone();
            }
            Err(e) => return Err(e),
        }
    }
}
