//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, CONFIG,
//! CLIENT, COMMAND, QUIT, SHUTDOWN. (`INFO` is in `info.rs`.)

use turtlekv::Result;

use super::{COMMANDS, Call, CommandSpec, int_arg, is, lookup};
use crate::config::SyncMode;
use crate::glob;
use crate::resp::{Protocol, Reply};

pub use super::info::info;

/// The Redis version whose command set the server follows, for clients
/// that look at `HELLO`'s `version`.
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

pub fn ping(c: &mut Call<'_, '_>) -> Result<()> {
    match c.args.len() {
        1 => c.reply.simple("PONG"),
        2 => c.reply.bulk(&c.args[1]),
        _ => c
            .reply
            .error("ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

pub fn echo(c: &mut Call<'_, '_>) -> Result<()> {
    c.reply.bulk(&c.args[1]);
    Ok(())
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell an attacker how much of a guess was right.
fn password_matches(given: &[u8], expected: &str) -> bool {
    let expected = expected.as_bytes();
    let mut diff = given.len() ^ expected.len();
    for (i, &b) in given.iter().enumerate() {
        diff |= usize::from(b ^ expected.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// Checks `user`/`password` (only the user `default` exists); replies
/// with the error and returns false when they are wrong.
fn authenticate(c: &mut Call<'_, '_>, user: &[u8], password: &[u8]) -> bool {
    let Some(expected) = &c.shared.config.requirepass else {
        c.reply.error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
        return false;
    };
    if user == b"default" && password_matches(password, expected) {
        c.session.authenticated = true;
        true
    } else {
        c.reply
            .error("WRONGPASS invalid username-password pair or user is disabled.");
        false
    }
}

pub fn auth(c: &mut Call<'_, '_>) -> Result<()> {
    let ok = match c.args.len() {
        2 => authenticate(c, b"default", &c.args[1].clone()),
        3 => authenticate(c, &c.args[1].clone(), &c.args[2].clone()),
        _ => {
            c.reply.error("ERR syntax error");
            false
        }
    };
    if ok {
        c.reply.ok();
    }
    Ok(())
}

pub fn hello(c: &mut Call<'_, '_>) -> Result<()> {
    let mut protocol = c.session.protocol;
    if let Some(version) = c.args.get(1) {
        protocol = match crate::resp::parse::parse_i64(version) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            _ => {
                c.reply.error("NOPROTO unsupported protocol version");
                return Ok(());
            }
        };
    }
    let mut i = 2;
    while i < c.args.len() {
        if is(&c.args[i], "AUTH") && i + 2 < c.args.len() {
            let (user, password) = (c.args[i + 1].clone(), c.args[i + 2].clone());
            if !authenticate(c, &user, &password) {
                return Ok(());
            }
            i += 3;
        } else if is(&c.args[i], "SETNAME") && i + 1 < c.args.len() {
            c.session.name = Some(c.args[i + 1].clone());
            i += 2;
        } else {
            c.reply.error("ERR syntax error in HELLO option");
            return Ok(());
        }
    }
    if !c.session.authenticated {
        c.reply.error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
        return Ok(());
    }
    c.session.protocol = protocol;
    c.reply.protocol = protocol;
    let r = &mut *c.reply;
    r.map(8);
    for (key, value) in [
        ("server", "turtlekv"),
        ("version", REDIS_COMPAT_VERSION),
        ("turtlekv_version", env!("CARGO_PKG_VERSION")),
    ] {
        r.bulk(key.as_bytes());
        r.bulk(value.as_bytes());
    }
    r.bulk(b"proto");
    r.integer(if protocol == Protocol::Resp3 { 3 } else { 2 });
    r.bulk(b"id");
    r.integer(0);
    for (key, value) in [("mode", "standalone"), ("role", "master")] {
        r.bulk(key.as_bytes());
        r.bulk(value.as_bytes());
    }
    r.bulk(b"modules");
    r.array(0);
    Ok(())
}

pub fn select(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(index) = int_arg(&c.args[1], c.reply) else {
        return Ok(());
    };
    let Some(index) = u32::try_from(index)
        .ok()
        .filter(|&i| i < c.shared.config.databases)
    else {
        c.reply.error("ERR DB index is out of range");
        return Ok(());
    };
    c.session.space = c.shared.space(index)?;
    c.session.db_index = index;
    c.reply.ok();
    Ok(())
}

pub fn quit(c: &mut Call<'_, '_>) -> Result<()> {
    c.session.closing = true;
    c.reply.ok();
    Ok(())
}

/// Stops the server: the listener closes, then the database (cleanly,
/// `Db::close`). Like Redis, no reply: the connection just closes.
pub fn shutdown(c: &mut Call<'_, '_>) -> Result<()> {
    c.session.closing = true;
    c.shared.shutdown.notify_one();
    Ok(())
}

pub fn client(c: &mut Call<'_, '_>) -> Result<()> {
    let sub = &c.args[1];
    if is(sub, "SETNAME") && c.args.len() == 3 {
        c.session.name = Some(c.args[2].clone());
        c.reply.ok();
    } else if is(sub, "GETNAME") {
        let name = c.session.name.clone();
        c.reply.bulk_or_null(name.as_deref());
    } else if is(sub, "SETINFO") && c.args.len() == 4 {
        // Library name and version, which clients send on connecting.
        c.reply.ok();
    } else if is(sub, "ID") {
        c.reply.integer(0);
    } else {
        c.reply.error(&format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            sub.escape_ascii()
        ));
    }
    Ok(())
}

/// `CONFIG GET` answers the settings tools ask about; `CONFIG SET` is
/// refused (settings are command line options).
pub fn config(c: &mut Call<'_, '_>) -> Result<()> {
    if !is(&c.args[1], "GET") || c.args.len() < 3 {
        c.reply
            .error("ERR turtlekv-server supports only CONFIG GET <parameter>...");
        return Ok(());
    }
    let cfg = &c.shared.config;
    let settings = [
        ("save", String::new()),
        ("appendonly", "yes".to_string()),
        (
            "appendfsync",
            match cfg.sync {
                SyncMode::Always => "always",
                SyncMode::Everysec => "everysec",
                SyncMode::No => "no",
            }
            .to_string(),
        ),
        ("databases", cfg.databases.to_string()),
        ("maxclients", cfg.max_clients.to_string()),
        ("proto-max-bulk-len", cfg.max_bulk_len.to_string()),
        ("port", cfg.bind.port().to_string()),
    ];
    let found: Vec<_> = settings
        .iter()
        .filter(|(name, _)| {
            c.args[2..]
                .iter()
                .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
        })
        .collect();
    c.reply.map(found.len());
    for (name, value) in found {
        c.reply.bulk(name.as_bytes());
        c.reply.bulk(value.as_bytes());
    }
    Ok(())
}

fn command_info(r: &mut Reply, spec: &CommandSpec) {
    r.array(10);
    r.bulk(spec.name.to_ascii_lowercase().as_bytes());
    r.integer(i64::from(spec.arity));
    r.array(spec.flags.len());
    for flag in spec.flags {
        r.simple(flag);
    }
    r.integer(i64::from(spec.first_key));
    r.integer(i64::from(spec.last_key));
    r.integer(i64::from(spec.key_step));
    // ACL categories, tips, key specs, subcommands: none described.
    for _ in 0..4 {
        r.array(0);
    }
}

pub fn command(c: &mut Call<'_, '_>) -> Result<()> {
    let Some(sub) = c.args.get(1) else {
        c.reply.array(COMMANDS.len());
        for spec in COMMANDS {
            command_info(c.reply, spec);
        }
        return Ok(());
    };
    if is(sub, "COUNT") {
        c.reply
            .integer(i64::try_from(COMMANDS.len()).unwrap_or(i64::MAX));
    } else if is(sub, "INFO") {
        c.reply.array(c.args.len() - 2);
        for name in &c.args[2..] {
            match lookup(name) {
                Some(spec) => command_info(c.reply, spec),
                None => c.reply.null_array(),
            }
        }
    } else if is(sub, "DOCS") {
        // Documentation is optional for clients: redis-cli asks for it for
        // its hints and does without.
        c.reply.map(0);
    } else {
        c.reply.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            sub.escape_ascii()
        ));
    }
    Ok(())
}
