//! The command table and dispatch: name lookup, arity, authentication,
//! `MULTI` queueing, then the command's handler.

mod admin;
mod coalesce;
mod info;
mod keys;
mod scan;
mod strings;
mod table;
mod txn;

use bytes::Bytes;

use crate::resp::Reply;
use crate::session::{Multi, Session};
use crate::shared::{Counters, Shared};
use crate::store::Exec;
pub use coalesce::{counter_run_len, get_run_len, run_counters, run_gets, run_sets, set_run_len};
pub use table::{COMMANDS, CommandSpec, lookup};

/// Everything a handler sees.
#[derive(Debug)]
pub struct Call<'a, 'e> {
    pub shared: &'a Shared,
    pub session: &'a mut Session,
    pub reply: &'a mut Reply,
    pub exec: &'a mut Exec<'e>,
    pub args: &'a [Bytes],
}

/// A handler returns engine errors; dispatch turns them into replies.
pub type Handler = fn(&mut Call<'_, '_>) -> turtlekv::Result<()>;

/// Whether any request of a batch reaches the engine (and so should run on
/// the engine's threads rather than the network's).
pub fn needs_engine(batch: &[Vec<Bytes>]) -> bool {
    batch
        .iter()
        .any(|args| match args.first().and_then(|n| lookup(n)) {
            Some(spec) => spec.engine,
            None => false,
        })
}

/// Runs one request and writes its reply.
pub fn dispatch(shared: &Shared, session: &mut Session, reply: &mut Reply, args: &[Bytes]) {
    Counters::bump(&shared.counters.commands);
    let Some(name) = args.first() else {
        return;
    };
    let Some(spec) = lookup(name) else {
        reply.error(&unknown_command(args));
        if let Some(multi) = &mut session.multi {
            multi.dirty = true;
        }
        return;
    };
    if !spec.arity_ok(args.len()) {
        reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name.to_ascii_lowercase()
        ));
        if let Some(multi) = &mut session.multi {
            multi.dirty = true;
        }
        return;
    }
    if !session.authenticated && !spec.before_auth {
        reply.error("NOAUTH Authentication required.");
        return;
    }
    if let Some(multi) = &mut session.multi
        && !spec.controls_multi
    {
        queue(multi, spec, args, reply);
        return;
    }
    if spec.writes {
        session.wrote = true;
    }
    let mut exec = Exec::Direct {
        db: &shared.db,
        write: shared.write,
        retries: &shared.counters.txn_retries,
    };
    run(shared, session, reply, &mut exec, spec, args);
}

/// Runs a command whose name and arity were checked, reporting an engine
/// error as an error reply.
pub fn run(
    shared: &Shared,
    session: &mut Session,
    reply: &mut Reply,
    exec: &mut Exec<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) {
    let mut call = Call {
        shared,
        session,
        reply,
        exec,
        args,
    };
    if let Err(e) = (spec.handler)(&mut call) {
        call.reply.error(&engine_error(&e));
    }
}

fn queue(multi: &mut Multi, spec: &CommandSpec, args: &[Bytes], reply: &mut Reply) {
    if !spec.in_multi {
        reply.error(&format!(
            "ERR {} is not allowed inside MULTI",
            spec.name.to_ascii_uppercase()
        ));
        multi.dirty = true;
        return;
    }
    multi.queued.push(args.to_vec());
    reply.simple("QUEUED");
}

/// Redis's wording, with the first arguments quoted.
fn unknown_command(args: &[Bytes]) -> String {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        printable(&args[0])
    );
    for arg in args.iter().skip(1).take(8) {
        text.push_str(&format!("'{}' ", printable(arg)));
    }
    text
}

fn printable(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(128)];
    cut.escape_ascii().to_string()
}

/// The error reply for an engine error: input errors read like Redis's
/// own, anything else says it came from the storage engine.
pub fn engine_error(e: &turtlekv::Error) -> String {
    use turtlekv::Error;
    match e {
        Error::EmptyKey => "ERR empty keys are not supported by turtlekv".into(),
        Error::KeyTooLarge {
            len_bytes,
            max_bytes,
        } => format!("ERR key of {len_bytes} bytes is longer than the limit of {max_bytes}"),
        Error::ValueTooLarge {
            len_bytes,
            max_bytes,
        } => {
            format!("ERR value of {len_bytes} bytes is longer than the limit of {max_bytes}")
        }
        Error::BatchTooLarge { .. } => format!("ERR request too large for one write: {e}"),
        other => format!("ERR storage engine: {other}"),
    }
}

/// Case-insensitive comparison of an argument with a keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// An argument as an `i64`, or the reply Redis gives.
pub fn int_arg(arg: &[u8], reply: &mut Reply) -> Option<i64> {
    let n = crate::resp::parse::parse_i64(arg);
    if n.is_none() {
        reply.error("ERR value is not an integer or out of range");
    }
    n
}
