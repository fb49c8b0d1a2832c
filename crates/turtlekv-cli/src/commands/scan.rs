//! `scan`: records in key order, forwards or backwards, bounded.

use std::io::Write;
use std::ops::Bound;

use anyhow::{Context as _, Result};

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
    // Keys only: the iterator never reads values, so separated values'
    // files are not touched.
    let items = if args.keys_only {
        directed(iter.keys().map(|k| k.map(|k| (k, None))), args.reverse)
    } else {
        directed(iter.map(|kv| kv.map(|(k, v)| (k, Some(v)))), args.reverse)
    };
    let limit = args
        .limit
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    for item in items.take(limit) {
        let (key, value) = item.context("scan")?;
        match value {
            None => writeln!(out, "{}", encoding.encode(&key, "key")?)?,
            Some(value) if args.json => writeln!(out, "{}", json_line(&key, &value, encoding))?,
            Some(value) => {
                let key = encoding.encode(&key, "key")?;
                let value = encoding.encode(&value, &format!("the value of key {key:?}"))?;
                writeln!(out, "{key}\t{value}")?;
            }
        }
    }
    Ok(())
}

/// `iter` forwards, or backwards when `reverse`.
fn directed<I: DoubleEndedIterator + 'static>(
    iter: I,
    reverse: bool,
) -> Box<dyn Iterator<Item = I::Item>> {
    if reverse {
        Box::new(iter.rev())
    } else {
        Box::new(iter)
    }
}
