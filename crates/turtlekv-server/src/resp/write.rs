//! Encoding replies. Commands write straight into the connection's output
//! buffer through [`Reply`], in the protocol version the client chose with
//! `HELLO` (RESP2 by default; RESP3 changes only nulls and maps here).

use std::io::Write as _;

/// The protocol version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// An output buffer that encodes replies.
#[derive(Debug)]
pub struct Reply {
    pub out: Vec<u8>,
    pub protocol: Protocol,
}

impl Reply {
    pub fn new(protocol: Protocol) -> Self {
        Reply {
            out: Vec::with_capacity(4096),
            protocol,
        }
    }

    /// `+OK`-style status (must hold no CR or LF).
    pub fn simple(&mut self, status: &str) {
        self.out.push(b'+');
        self.out.extend_from_slice(status.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// An error reply; `message` starts with its code (`ERR`, `WRONGTYPE`,
    /// ...). Line breaks are replaced, since the reply is one line.
    pub fn error(&mut self, message: &str) {
        self.out.push(b'-');
        self.out.extend(
            message
                .bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn integer(&mut self, n: i64) {
        // Writing to a Vec cannot fail.
        let _ = write!(self.out, ":{n}\r\n");
    }

    pub fn bulk(&mut self, data: &[u8]) {
        let _ = write!(self.out, "${}\r\n", data.len());
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn bulk_or_null(&mut self, data: Option<&[u8]>) {
        match data {
            Some(d) => self.bulk(d),
            None => self.null(),
        }
    }

    pub fn null(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.extend_from_slice(b"$-1\r\n"),
            Protocol::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The reply of an aborted `EXEC`.
    pub fn null_array(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.extend_from_slice(b"*-1\r\n"),
            Protocol::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    pub fn array(&mut self, len: usize) {
        let _ = write!(self.out, "*{len}\r\n");
    }

    /// A map of `pairs` entries: RESP3's map, RESP2's flat array of twice
    /// the length.
    pub fn map(&mut self, pairs: usize) {
        match self.protocol {
            Protocol::Resp2 => self.array(pairs * 2),
            Protocol::Resp3 => {
                let _ = write!(self.out, "%{pairs}\r\n");
            }
        }
    }

    /// Text that RESP3 sends as a verbatim string (`INFO`), RESP2 as bulk.
    pub fn verbatim(&mut self, text: &str) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                let _ = write!(self.out, "={}\r\ntxt:", text.len() + 4);
                self.out.extend_from_slice(text.as_bytes());
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }
}
