//! Every command the server knows, with what dispatch and `COMMAND` need.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::{Handler, admin, keys, scan, strings, txn};

/// One command. `arity` follows Redis: the number of arguments including
/// the name, or at least `-arity` when negative.
#[derive(Debug)]
pub struct CommandSpec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    /// Reaches the engine, so it runs on the engine threads.
    pub engine: bool,
    /// Allowed before `AUTH` succeeds.
    pub before_auth: bool,
    /// Runs at once even between `MULTI` and `EXEC`.
    pub controls_multi: bool,
    /// May be queued between `MULTI` and `EXEC`.
    pub in_multi: bool,
    /// May write: under `--sync always` its batch syncs before replying.
    pub writes: bool,
    pub handler: Handler,
}

impl CommandSpec {
    pub fn arity_ok(&self, len: usize) -> bool {
        let len = i64::try_from(len).unwrap_or(i64::MAX);
        let arity = i64::from(self.arity);
        if arity >= 0 {
            len == arity
        } else {
            len >= -arity
        }
    }
}

const R: &[&str] = &["readonly", "fast"];
const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const C: &[&str] = &["fast", "loading", "stale"];

/// Whether a command's flags (as `COMMAND` lists them) start with `write`.
const fn has_write_flag(flags: &[&str]) -> bool {
    let Some(first) = flags.first() else {
        return false;
    };
    let (a, b) = (first.as_bytes(), b"write");
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A data command: keys from `first` to `last` (negative counts from the
/// end) every `step` arguments.
const fn data(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    (first_key, last_key, key_step): (i32, i32, i32),
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key,
        last_key,
        key_step,
        engine: true,
        before_auth: false,
        controls_multi: false,
        in_multi: true,
        writes: has_write_flag(flags),
        handler,
    }
}

/// A command about the connection or the server that touches no key.
const fn control(name: &'static str, arity: i32, engine: bool, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: C,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        engine,
        before_auth: false,
        controls_multi: false,
        in_multi: true,
        writes: false,
        handler,
    }
}

const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);
const NONE: (i32, i32, i32) = (0, 0, 0);

pub static COMMANDS: &[CommandSpec] = &[
    data("GET", 2, R, ONE, strings::get),
    data("SET", -3, W, ONE, strings::set),
    data("SETNX", 3, WF, ONE, strings::setnx),
    data("GETSET", 3, WF, ONE, strings::getset),
    data("GETDEL", 2, WF, ONE, strings::getdel),
    data("MGET", -2, R, ALL, strings::mget),
    data("MSET", -3, W, PAIRS, strings::mset),
    data("MSETNX", -3, W, PAIRS, strings::msetnx),
    data("INCR", 2, WF, ONE, strings::incr),
    data("DECR", 2, WF, ONE, strings::decr),
    data("INCRBY", 3, WF, ONE, strings::incrby),
    data("DECRBY", 3, WF, ONE, strings::decrby),
    data("APPEND", 3, WF, ONE, strings::append),
    data("STRLEN", 2, R, ONE, strings::strlen),
    data("DEL", -2, &["write"], ALL, keys::del),
    data("UNLINK", -2, &["write", "fast"], ALL, keys::del),
    data("EXISTS", -2, R, ALL, keys::exists),
    data("TYPE", 2, R, ONE, keys::key_type),
    data("TTL", 2, R, ONE, keys::ttl),
    data("PTTL", 2, R, ONE, keys::ttl),
    // A scan inside a transaction is not offered: SCAN and KEYS read the
    // database directly.
    CommandSpec {
        in_multi: false,
        ..data("SCAN", -2, &["readonly"], NONE, scan::scan)
    },
    CommandSpec {
        in_multi: false,
        ..data("KEYS", 2, &["readonly"], NONE, scan::keys)
    },
    data("DBSIZE", 1, R, NONE, keys::dbsize),
    CommandSpec {
        in_multi: false,
        flags: &["write"],
        ..data("FLUSHDB", -1, W, NONE, keys::flushdb)
    },
    CommandSpec {
        in_multi: false,
        flags: &["write"],
        ..data("FLUSHALL", -1, W, NONE, keys::flushall)
    },
    CommandSpec {
        before_auth: true,
        ..control("PING", -1, false, admin::ping)
    },
    control("ECHO", 2, false, admin::echo),
    CommandSpec {
        before_auth: true,
        in_multi: false,
        ..control("HELLO", -1, false, admin::hello)
    },
    CommandSpec {
        before_auth: true,
        in_multi: false,
        ..control("AUTH", -2, false, admin::auth)
    },
    // Opening a keyspace for the first time writes the catalog.
    control("SELECT", 2, true, admin::select),
    control("INFO", -1, true, admin::info),
    control("COMMAND", -1, false, admin::command),
    control("CONFIG", -2, false, admin::config),
    control("CLIENT", -2, false, admin::client),
    CommandSpec {
        before_auth: true,
        controls_multi: true,
        ..control("QUIT", -1, false, admin::quit)
    },
    CommandSpec {
        in_multi: false,
        ..control("SHUTDOWN", -1, false, admin::shutdown)
    },
    CommandSpec {
        controls_multi: true,
        ..control("MULTI", 1, false, txn::multi)
    },
    CommandSpec {
        controls_multi: true,
        writes: true,
        ..control("EXEC", 1, true, txn::exec)
    },
    CommandSpec {
        controls_multi: true,
        ..control("DISCARD", 1, false, txn::discard)
    },
    CommandSpec {
        controls_multi: true,
        ..data("WATCH", -2, C, ALL, txn::watch)
    },
    CommandSpec {
        controls_multi: true,
        ..control("UNWATCH", 1, false, txn::unwatch)
    },
];

static BY_NAME: LazyLock<HashMap<&'static [u8], &'static CommandSpec>> =
    LazyLock::new(|| COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect());

/// The command named `name`, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    // Command names are short: upper-case on the stack, not in a String.
    let mut upper = [0u8; 16];
    let slot = upper.get_mut(..name.len())?;
    slot.copy_from_slice(name);
    slot.make_ascii_uppercase();
    BY_NAME.get(&*slot).copied()
}
