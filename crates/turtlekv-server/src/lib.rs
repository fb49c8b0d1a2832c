//! `turtlekv-server`: the Redis protocol over a TurtleKV database.
//!
//! The binary (`src/main.rs`) parses a [`config::Config`] and calls
//! [`server::run`]; the library exists so that tests reach the protocol
//! decoder and the pattern matcher directly. `docs/server.md` describes
//! the commands, the durability settings and the limits.

pub mod commands;
pub mod config;
pub mod conn;
pub mod error;
pub mod glob;
pub mod resp;
pub mod server;
pub mod session;
pub mod shared;
pub mod store;
