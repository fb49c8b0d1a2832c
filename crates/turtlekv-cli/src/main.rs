//! `turtlekv`: look inside and operate a TurtleKV database. See
//! `docs/cli.md`.

mod cli;
mod commands;
mod db;
mod encoding;
mod error;
mod keyspace;
mod records;
mod size;

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Parser as _;

use crate::cli::{Cli, Command};
use crate::commands::{
    backup, bench, check, checkpoint, dump, keyspaces, kv, load, scan, stats, tune,
};
use crate::error::{Exit, exit_for, is_broken_pipe};

fn main() -> ExitCode {
    // clap prints its own message and exits with 2 for bad arguments (0
    // for --help and --version).
    let cli = Cli::parse();
    db::set_wal_recovery(cli.wal_recovery);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = run(&cli.command, &mut out).and_then(|()| Ok(out.flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`turtlekv scan DB | head`):
        // it has what it wanted.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // Whatever was printed before the failure goes out first, then
            // the error, so that the two appear in order on a terminal.
            let _ = out.flush();
            let exit = exit_for(&err);
            // The same shape as clap's own errors.
            eprintln!("error: {err:#}");
            match exit {
                Exit::Usage => eprintln!("\nFor more information, try '--help'."),
                Exit::Locked => eprintln!(
                    "\nAnother process (or another handle in one) has the database open; \
                     it can be used once that one closes it. Meanwhile, `get`, `scan`, \
                     `dump`, `stats` and `check` read it with --read-only, and \
                     `turtlekv backup` copies it."
                ),
                Exit::Changed => eprintln!(
                    "\nThe process holding the database committed a checkpoint while this \
                     read it; run the command again, or copy it with `turtlekv backup`."
                ),
                _ => {}
            }
            exit.into()
        }
    }
}

fn run(command: &Command, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        Command::Put(args) => kv::put(args),
        Command::Get(args) => kv::get(args, out),
        Command::Delete(args) => kv::delete(args),
        Command::DeleteRange(args) => kv::delete_range(args),
        Command::Scan(args) => scan::scan(args, out),
        Command::Load(args) => load::load(args, out),
        Command::Dump(args) => dump::dump(args, out),
        Command::Keyspaces(args) => keyspaces::list(args, out),
        Command::DropKeyspace(args) => keyspaces::drop_keyspace(args, out),
        Command::Stats(args) => stats::stats(args, out),
        Command::Check(args) => check::check(args, out),
        Command::Checkpoint(args) => checkpoint::checkpoint(args, out),
        Command::Backup(args) => backup::backup(args, out),
        Command::Tune(args) => tune::tune(args, out),
        Command::Bench(args) => bench::bench(args, out),
    }
}
