//! One connection's state, which commands read and change.

use bytes::Bytes;

use crate::resp::Protocol;
use crate::store::Space;

/// A key `WATCH`ed for `EXEC`: its database and the value it had then.
#[derive(Debug, Clone)]
pub struct Watched {
    pub space: Space,
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// The commands queued between `MULTI` and `EXEC`.
#[derive(Debug, Default)]
pub struct Multi {
    pub queued: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: `EXEC` discards everything.
    pub dirty: bool,
}

#[derive(Debug)]
pub struct Session {
    pub db_index: u32,
    pub space: Space,
    pub authenticated: bool,
    pub protocol: Protocol,
    pub multi: Option<Multi>,
    pub watched: Vec<Watched>,
    /// The client asked to close (`QUIT`), or the stream is unusable.
    pub closing: bool,
    pub name: Option<Bytes>,
    /// A command of the current batch wrote (or may have): under
    /// `--sync always` the log is synced before the batch's replies go.
    pub wrote: bool,
}

impl Session {
    pub fn new(authenticated: bool) -> Self {
        Session {
            db_index: 0,
            space: Space::Default,
            authenticated,
            protocol: Protocol::Resp2,
            multi: None,
            watched: Vec::new(),
            closing: false,
            name: None,
            wrote: false,
        }
    }
}
