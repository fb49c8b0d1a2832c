//! `turtlekv-bench ycsb|plot|report ...`: see `docs/benchmarks.md`.

use anyhow::{Context, Result};
use clap::Parser as _;
use turtlekv_bench::cli::{Cli, Command};
use turtlekv_bench::meta::RunMetadata;
use turtlekv_bench::{markdown, plot, report, ycsb};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Ycsb(args) => {
            // Taken first: `started_at` is when the run began.
            let metadata = RunMetadata::for_run(&args, std::env::args().collect());
            let ycsb::Comparison { results, failures } = ycsb::run_all(&args)?;
            if !args.child {
                print!("{}", report::render_table(&results));
            }
            if let Some(path) = &args.json {
                std::fs::write(path, report::to_json(Some(&metadata), &results)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if let Some(path) = &args.plot {
                let file = report::ResultsFile::new(Some(metadata), results);
                let run = report::LabelledRun {
                    label: String::new(),
                    file,
                };
                plot::plot_runs(&[run], None, path)?;
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
        Command::Plot(args) => {
            let runs = report::load_runs(&args.inputs, &args.labels)?;
            plot::plot_runs(&runs, args.title.as_deref(), &args.out)
        }
        Command::Report(args) => {
            let runs = report::load_runs(&args.inputs, &args.labels)?;
            print!("{}", markdown::render(&runs));
            Ok(())
        }
    }
}
