//! Transactions: optimistic, checked at commit by the group commit's
//! leader (`check.rs`), with compare-and-swap and update-and-fetch built
//! on them (`cas.rs`).

mod cas;
pub(crate) mod check;
mod iter;
#[cfg(test)]
mod tests;
mod transaction;

pub use cas::CompareAndSwapError;
pub use iter::TransactionIter;
pub use transaction::Transaction;
