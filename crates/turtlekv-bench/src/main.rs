//! `turtlekv-bench ycsb ...`: see `docs/benchmarks.md`.

use anyhow::{Context, Result};
use clap::Parser as _;
use turtlekv_bench::cli::{Cli, Command};
use turtlekv_bench::{plot, report, ycsb};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ycsb(args) => {
            let ycsb::Comparison { results, failures } = ycsb::run_all(&args)?;
            if !args.child {
                print!("{}", report::render_table(&results));
            }
            if let Some(path) = &args.json {
                std::fs::write(path, report::to_json(&results)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if let Some(path) = &args.plot {
                plot::plot_throughput(&results, path)?;
            }
            if !failures.is_empty() {
                anyhow::bail!(
                    "{} of the engines failed; the results above are the others':\n{}",
                    failures.len(),
                    failures.join("\n")
                );
            }
            Ok(())
        }
    }
}
