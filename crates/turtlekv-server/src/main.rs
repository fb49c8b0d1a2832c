//! `turtlekv-server --dir DIR [--bind ADDR] [--sync always|everysec|no] ...`

use std::process::ExitCode;

use clap::Parser;
use turtlekv_server::config::Config;

fn main() -> ExitCode {
    let config = Config::parse();
    match turtlekv_server::server::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turtlekv-server: {e}");
            ExitCode::FAILURE
        }
    }
}
