//! Runs each engine of a multi-engine comparison in its own child process
//! (this same binary), so that per-process readings such as peak RSS and
//! device bytes written belong to that engine alone.

use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};

/// Signal number of SIGKILL on Linux.
const SIGKILL: i32 = 9;

use anyhow::{Context, Result, bail};

use crate::cgroup::MemoryCgroup;
use crate::cli::YcsbArgs;
use crate::engines::EngineKind;
use crate::report::{PhaseResult, ResultsFile};

/// Runs `engine` with `args`' settings in a child process and returns its
/// results. The child's progress bars and errors go to our stderr. With
/// `--memory-limit-bytes` the child runs in a memory cgroup of that size,
/// created here and removed when the child has exited.
pub fn run_in_child(args: &YcsbArgs, engine: EngineKind) -> Result<Vec<PhaseResult>> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let json = scratch.path().join(format!("{engine}.json"));
    // The child's engine directory goes inside one we own, so that it is
    // removed even when the child is killed (by the OOM killer, say).
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let engine_parent = tempfile::Builder::new()
        .prefix(&format!("turtlekv-bench-{engine}-parent-"))
        .tempdir_in(&parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))?;
    let mut child_args = args.clone();
    child_args.dir = Some(engine_parent.path().to_path_buf());
    let cgroup = match args.memory_limit_bytes {
        Some(limit) => Some(MemoryCgroup::create(
            &format!("turtlekv-bench-{}-{engine}", std::process::id()),
            limit,
        )?),
        None => None,
    };
    let status = Command::new(&exe)
        .args(child_args.child_args(engine, &json, cgroup.as_ref().map(MemoryCgroup::path)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .with_context(|| format!("starting {} for {engine}", exe.display()))?;
    // The child has exited, so its group is empty and can go.
    drop(cgroup);
    if !status.success() {
        if let (Some(limit), Some(signal)) = (args.memory_limit_bytes, status.signal())
            && signal == SIGKILL
        {
            bail!(
                "the {engine} run was killed (SIGKILL), most likely by the OOM killer at the \
                 memory limit of {limit} bytes"
            );
        }
        bail!("the {engine} run failed ({status}); its error is printed above");
    }
    let text =
        std::fs::read_to_string(&json).with_context(|| format!("reading the {engine} results"))?;
    let file =
        ResultsFile::parse(&text).with_context(|| format!("parsing the {engine} results"))?;
    Ok(file.results)
}
