//! Runs each engine of a multi-engine comparison in its own child process
//! (this same binary), so that per-process readings such as peak RSS and
//! device bytes written belong to that engine alone.

use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::cli::YcsbArgs;
use crate::engines::EngineKind;
use crate::report::PhaseResult;

/// Runs `engine` with `args`' settings in a child process and returns its
/// results. The child's progress bars and errors go to our stderr.
pub fn run_in_child(args: &YcsbArgs, engine: EngineKind) -> Result<Vec<PhaseResult>> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let json = scratch.path().join(format!("{engine}.json"));
    let status = Command::new(&exe)
        .args(args.child_args(engine, &json))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .with_context(|| format!("starting {} for {engine}", exe.display()))?;
    if !status.success() {
        bail!("the {engine} run failed ({status}); its error is printed above");
    }
    let text =
        std::fs::read_to_string(&json).with_context(|| format!("reading the {engine} results"))?;
    serde_json::from_str(&text).with_context(|| format!("parsing the {engine} results"))
}
