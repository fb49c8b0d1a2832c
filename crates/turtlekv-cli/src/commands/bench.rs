//! `bench`: a short YCSB run through the `turtlekv-bench` driver, on a
//! temporary database with the engine's built-in defaults.

use std::io::Write;

use anyhow::{Context as _, Result};
use clap::Parser as _;
use turtlekv_bench::cli::{Cli, Command};
use turtlekv_bench::engines::EngineKind;
use turtlekv_bench::{meta, report, ycsb};

use crate::cli::BenchArgs;

pub fn bench(args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    // Start from the driver's own defaults so that settings this command
    // does not expose keep the driver's meaning.
    let Command::Ycsb(mut ycsb_args) = Cli::try_parse_from(["turtlekv-bench", "ycsb"])
        .context("the benchmark driver's defaults")?
        .command
    else {
        anyhow::bail!("the benchmark driver parsed `ycsb` as another command");
    };
    // TurtleKV only, in this process: the driver runs other engines (and
    // memory-limited runs) in child processes of its own binary, which
    // this one is not.
    ycsb_args.engines = vec![EngineKind::Turtlekv];
    ycsb_args.memory_limit_bytes = None;
    ycsb_args.records = args.records;
    ycsb_args.ops = args.ops;
    ycsb_args.workloads = args.workloads.clone();
    ycsb_args.threads = args.threads;
    ycsb_args.value_size = args.value_size;
    ycsb_args.distribution = args.distribution;
    ycsb_args.sync = args.sync;
    ycsb_args.dir = args.dir.clone();
    writeln!(
        out,
        "YCSB on a temporary TurtleKV database: {} records, {} operations per workload, {} \
         threads, {}-byte values",
        args.records, args.ops, args.threads, args.value_size
    )?;
    let metadata = meta::RunMetadata::for_run(&ycsb_args, std::env::args().collect());
    let results = ycsb::run(&ycsb_args).context("running the benchmark")?;
    write!(out, "{}", report::render_table(&results))?;
    if let Some(path) = &args.json {
        std::fs::write(path, report::to_json(Some(&metadata), &results)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
