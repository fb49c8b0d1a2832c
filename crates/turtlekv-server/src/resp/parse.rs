//! Incremental decoding of client requests: RESP arrays of bulk strings
//! (what every client library sends) and inline commands (what a person
//! types over telnet).
//!
//! The decoder keeps the arguments it has completed between reads, so a
//! request that arrives in many pieces is scanned once, not once per read;
//! each argument is a slice of the read buffer (no copy). Every length is
//! checked against [`Limits`] before anything is allocated for it, so a
//! hostile client cannot make the server reserve more than the limits say.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::ProtocolError;

/// How large a request may be. Defaults follow Redis where the engine
/// allows it; a bulk string never needs to exceed the engine's value limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string (one argument), in bytes.
    pub max_bulk_len_bytes: usize,
    /// Most arguments in one request.
    pub max_multibulk_len: usize,
    /// Most bytes of all arguments of one request together.
    pub max_request_bytes: usize,
    /// Longest inline command line, and longest `*`/`$` header line.
    pub max_inline_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // As `--max-bulk-len` by default; the engine takes values up
            // to `turtlekv::MAX_VALUE_SIZE`, which the option may allow.
            max_bulk_len_bytes: 256 * 1024,
            max_multibulk_len: 1024 * 1024,
            max_request_bytes: 64 * 1024 * 1024,
            max_inline_bytes: 64 * 1024,
        }
    }
}

/// A request being assembled: the arguments completed so far.
#[derive(Debug)]
struct Partial {
    expected: usize,
    args: Vec<Bytes>,
    bytes: usize,
}

/// Turns bytes from a connection into requests (`Vec<Bytes>` of arguments).
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    partial: Option<Partial>,
}

impl Decoder {
    pub fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            partial: None,
        }
    }

    /// Whether a request has begun but not ended (the connection closing
    /// now would cut it).
    pub fn is_mid_request(&self) -> bool {
        self.partial.is_some()
    }

    /// The next complete request in `buf`, consuming its bytes; `None` when
    /// `buf` holds only part of one (whatever was complete is kept). Empty
    /// requests (`*0`, a blank line) are skipped. An error means the stream
    /// cannot be trusted any more: the connection should be closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.partial.is_none() {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first != b'*' {
                    match self.decode_inline(buf)? {
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                let Some(count) = self.header_line(buf, b'*')? else {
                    return Ok(None);
                };
                if count <= 0 {
                    continue;
                }
                let count = usize::try_from(count).map_err(|_| ProtocolError::MultibulkLength)?;
                if count > self.limits.max_multibulk_len {
                    return Err(ProtocolError::MultibulkLength);
                }
                self.partial = Some(Partial {
                    expected: count,
                    // Reserve by what has arrived, not by what the header
                    // claims: a header alone must not cost memory.
                    args: Vec::with_capacity(count.min(64)),
                    bytes: 0,
                });
            }
            return self.decode_bulks(buf);
        }
    }

    fn decode_bulks(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let limits = self.limits;
        let partial = self
            .partial
            .as_mut()
            .expect("decode_bulks runs mid-request");
        while partial.args.len() < partial.expected {
            let Some((header_len, len)) = peek_header(buf, b'$', limits.max_inline_bytes)? else {
                return Ok(None);
            };
            let len = usize::try_from(len).map_err(|_| ProtocolError::BulkLength)?;
            if len > limits.max_bulk_len_bytes {
                return Err(ProtocolError::BulkLength);
            }
            if partial.bytes + len > limits.max_request_bytes {
                return Err(ProtocolError::RequestTooLarge);
            }
            let total = header_len + len + 2;
            if buf.len() < total {
                // Room for the rest of this argument, so that the reads
                // that follow land in one allocation.
                buf.reserve(total - buf.len());
                return Ok(None);
            }
            if &buf[header_len + len..total] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            buf.advance(header_len);
            let arg = buf.split_to(len).freeze();
            buf.advance(2);
            partial.bytes += len;
            partial.args.push(arg);
        }
        let done = self.partial.take().expect("request was in progress");
        Ok(Some(done.args))
    }

    /// Consumes a `*<n>\r\n` line and returns `n`.
    fn header_line(&mut self, buf: &mut BytesMut, kind: u8) -> Result<Option<i64>, ProtocolError> {
        match peek_header(buf, kind, self.limits.max_inline_bytes)? {
            Some((header_len, n)) => {
                buf.advance(header_len);
                Ok(Some(n))
            }
            None => Ok(None),
        }
    }

    /// An inline command: one line, arguments split at spaces and tabs.
    fn decode_inline(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let window = buf.len().min(self.limits.max_inline_bytes + 2);
        let Some(newline) = buf[..window].iter().position(|&b| b == b'\n') else {
            if buf.len() > self.limits.max_inline_bytes {
                return Err(ProtocolError::InlineTooLong);
            }
            return Ok(None);
        };
        if newline > self.limits.max_inline_bytes {
            return Err(ProtocolError::InlineTooLong);
        }
        let line = buf.split_to(newline + 1).freeze();
        let mut body = line.slice(..newline);
        if body.last() == Some(&b'\r') {
            body.truncate(body.len() - 1);
        }
        let mut args = Vec::new();
        let mut start = None;
        for (i, &b) in body.iter().enumerate() {
            let blank = b == b' ' || b == b'\t';
            match (blank, start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    args.push(body.slice(s..i));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            args.push(body.slice(s..));
        }
        if args.len() > self.limits.max_multibulk_len {
            return Err(ProtocolError::MultibulkLength);
        }
        Ok(Some(args))
    }
}

/// Reads a `<kind><integer>\r\n` line at the start of `buf` without
/// consuming it: `(line length, integer)`, or `None` if incomplete.
fn peek_header(
    buf: &[u8],
    kind: u8,
    max_line_bytes: usize,
) -> Result<Option<(usize, i64)>, ProtocolError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if first != kind {
        return Err(ProtocolError::UnexpectedByte {
            expected: kind,
            found: first,
        });
    }
    // A header is short: looking further than the limit only costs time.
    let window = buf.len().min(max_line_bytes + 2);
    let Some(cr) = buf[..window].iter().position(|&b| b == b'\r') else {
        if buf.len() > max_line_bytes {
            return Err(ProtocolError::InlineTooLong);
        }
        return Ok(None);
    };
    if buf.len() < cr + 2 {
        return Ok(None);
    }
    if buf[cr + 1] != b'\n' {
        return Err(ProtocolError::MissingCrlf);
    }
    let n = parse_i64(&buf[1..cr]).ok_or(match kind {
        b'*' => ProtocolError::MultibulkLength,
        _ => ProtocolError::BulkLength,
    })?;
    Ok(Some((cr + 2, n)))
}

/// A decimal integer with an optional `-`, nothing else (no `+`, no
/// spaces, no leading zeros beyond a lone `0`), as Redis accepts it.
pub fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (negative, body) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if body.is_empty() || body.len() > 19 || (body[0] == b'0' && (body.len() > 1 || negative)) {
        return None;
    }
    let mut value: i64 = 0;
    for &d in body {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(d - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}
