//! Integration tests: the real `turtlekv-server` binary, driven through the
//! `redis` crate, raw sockets, `redis-cli`/`redis-benchmark` and twemproxy.
//! One test binary (its modules below) so the workspace links it once.

mod commands;
mod connections;
mod durability;
mod harness;
mod model;
mod proxy;
mod tools;
mod transactions;
