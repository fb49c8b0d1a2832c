//! The server's errors.

use std::io;

/// A request stream that cannot be decoded. The connection is answered
/// with `-ERR Protocol error: ...` and closed, as Redis does.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    #[error("invalid multibulk length")]
    MultibulkLength,
    #[error("invalid bulk length")]
    BulkLength,
    #[error("request larger than the server's limit")]
    RequestTooLarge,
    #[error("too big inline request")]
    InlineTooLong,
    #[error("expected '{}', got '{}'", char::from(*expected), (*found as char).escape_default())]
    UnexpectedByte { expected: u8, found: u8 },
    #[error("expected CRLF")]
    MissingCrlf,
}

/// Why the server could not start or stopped uncleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("database error: {0}")]
    Db(#[from] turtlekv::Error),
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}
