//! How keys and values are written on the command line and printed: UTF-8
//! text (the default), hex or base64.

use anyhow::{Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use clap::Args;

use crate::error::usage;

/// The `--hex` / `--base64` flags shared by the commands that take or
/// print keys and values.
#[derive(Debug, Clone, Copy, Args)]
pub struct EncodingArgs {
    /// Keys and values (given and printed) are hex, e.g. `00ff10`.
    #[arg(long, conflicts_with = "base64")]
    pub hex: bool,
    /// Keys and values (given and printed) are standard base64 with padding.
    #[arg(long)]
    pub base64: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Hex,
    Base64,
}

impl EncodingArgs {
    pub fn encoding(self) -> Encoding {
        if self.hex {
            Encoding::Hex
        } else if self.base64 {
            Encoding::Base64
        } else {
            Encoding::Utf8
        }
    }
}

impl Encoding {
    /// Decodes a command-line argument; `what` names it in the error.
    pub fn decode_arg(self, text: &str, what: &str) -> Result<Vec<u8>> {
        self.decode(text)
            .map_err(|e| usage(format!("{what} {text:?}: {e}")))
    }

    /// Decodes text in this encoding into bytes.
    pub fn decode(self, text: &str) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Utf8 => Ok(text.as_bytes().to_vec()),
            Encoding::Hex => decode_hex(text),
            Encoding::Base64 => STANDARD
                .decode(text)
                .map_err(|e| format!("not valid base64 ({e})")),
        }
    }

    /// Encodes bytes for printing. UTF-8 output of bytes that are not
    /// UTF-8 is an error rather than a lossy rendering: a printed value
    /// must be the stored value.
    pub fn encode(self, bytes: &[u8], what: &str) -> Result<String> {
        match self {
            Encoding::Utf8 => match std::str::from_utf8(bytes) {
                Ok(text) => Ok(text.to_string()),
                Err(_) => bail!(
                    "{what} {} is not UTF-8 text; use --hex or --base64 to print it",
                    encode_hex(bytes)
                ),
            },
            Encoding::Hex => Ok(encode_hex(bytes)),
            Encoding::Base64 => Ok(STANDARD.encode(bytes)),
        }
    }
}

pub fn encode_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Lower-case hex, two digits per byte.
pub fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// Hex in either case; an optional `0x` prefix is allowed because people
/// paste it.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "not valid hex (odd number of digits: {})",
            digits.len()
        ));
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!(
            "not valid hex ({:?} is not a hex digit)",
            char::from(c)
        )),
    };
    digits
        .as_bytes()
        .chunks_exact(2)
        .map(|pair| Ok(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode_hex(&encode_hex(&all)).unwrap(), all);
        assert_eq!(decode_hex("0xFF00").unwrap(), vec![255, 0]);
        assert!(decode_hex("abc").unwrap_err().contains("odd"));
        assert!(decode_hex("zz").unwrap_err().contains("hex digit"));
        // Multi-byte characters are not digits, and do not panic.
        assert!(decode_hex("é0").is_err());
    }

    #[test]
    fn utf8_output_refuses_binary() {
        let err = Encoding::Utf8.encode(&[0xff, 0], "value").unwrap_err();
        assert!(err.to_string().contains("ff00"), "{err}");
        assert_eq!(
            Encoding::Base64.encode(&[0xff, 0], "value").unwrap(),
            "/wA="
        );
        assert_eq!(Encoding::Base64.decode("/wA=").unwrap(), vec![0xff, 0]);
        assert!(Encoding::Base64.decode("!!").is_err());
    }
}
