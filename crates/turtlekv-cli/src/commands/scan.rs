//! `scan`: records in key order, forwards or backwards, bounded.

use std::io::Write;
use std::ops::Bound;

use anyhow::{Context as _, Result};
use turtlekv::Bytes;

use crate::cli::ScanArgs;
use crate::keyspace::Target;
use crate::records::json_line;

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> Result<()> {
    let keyspace = args.keyspace.name()?;
    let encoding = args.encoding.encoding();
    let decode = |text: &Option<String>, what: &str| {
        text.as_deref()
            .map(|t| encoding.decode_arg(t, what))
            .transpose()
    };
    let from = decode(&args.from, "--from")?;
    let to = decode(&args.to, "--to")?;
    let prefix = decode(&args.prefix, "--prefix")?;
    let target = Target::open(&args.db, args.read_only.create(), keyspace)?;
    let iter = match prefix {
        Some(prefix) => target.prefix(&prefix),
        None => target.range((
            from.map_or(Bound::Unbounded, Bound::Included),
            to.map_or(Bound::Unbounded, Bound::Excluded),
        )),
    };
    let iter: Box<dyn Iterator<Item = turtlekv::Result<(Bytes, Bytes)>>> = if args.reverse {
        Box::new(iter.rev())
    } else {
        Box::new(iter)
    };
    let limit = args
        .limit
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    for item in iter.take(limit) {
        let (key, value) = item.context("scan")?;
        if args.json {
            writeln!(out, "{}", json_line(&key, &value, encoding))?;
        } else if args.keys_only {
            writeln!(out, "{}", encoding.encode(&key, "key")?)?;
        } else {
            let key = encoding.encode(&key, "key")?;
            let value = encoding.encode(&value, &format!("the value of key {key:?}"))?;
            writeln!(out, "{key}\t{value}")?;
        }
    }
    Ok(())
}
