//! Property tests of the request decoder: what a client encodes comes back
//! whole however the bytes are split across reads, and arbitrary bytes
//! give requests or a protocol error, never a panic or unbounded memory.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::parse::{Decoder, Limits, parse_i64};
use crate::error::ProtocolError;

fn encode(requests: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for args in requests {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// Feeds `input` in pieces of the given sizes, decoding after each.
fn decode_in_pieces(
    limits: Limits,
    input: &[u8],
    piece_sizes: &[usize],
) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
    let mut decoder = Decoder::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = piece_sizes.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        while let Some(request) = decoder.decode(&mut buf)? {
            out.push(request);
        }
        // Never holds more than the request being assembled and one piece.
        assert!(buf.len() <= limits.max_bulk_len_bytes + limits.max_inline_bytes + n + 64);
    }
    Ok(out)
}

fn small_limits() -> Limits {
    Limits {
        max_bulk_len_bytes: 1024,
        max_multibulk_len: 64,
        max_request_bytes: 16 * 1024,
        max_inline_bytes: 256,
    }
}

proptest! {
    #[test]
    fn encoded_requests_decode_whole_across_any_split(
        requests in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..8),
            1..6,
        ),
        pieces in prop::collection::vec(1usize..64, 1..8),
    ) {
        let input = encode(&requests);
        let decoded = decode_in_pieces(small_limits(), &input, &pieces).expect("valid input");
        let decoded: Vec<Vec<Vec<u8>>> = decoded
            .into_iter()
            .map(|r| r.into_iter().map(|a| a.to_vec()).collect())
            .collect();
        prop_assert_eq!(decoded, requests);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        input in prop::collection::vec(any::<u8>(), 0..2048),
        pieces in prop::collection::vec(1usize..128, 1..4),
    ) {
        let _ = decode_in_pieces(small_limits(), &input, &pieces);
    }

    #[test]
    fn mutated_requests_never_panic(
        requests in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
            1..4,
        ),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut input = encode(&requests);
        for (at, byte) in flips {
            let i = at.index(input.len());
            input[i] = byte;
        }
        let _ = decode_in_pieces(small_limits(), &input, &[7]);
    }

    #[test]
    fn integers_round_trip(n in any::<i64>()) {
        prop_assert_eq!(parse_i64(n.to_string().as_bytes()), Some(n));
    }
}

#[test]
fn limits_are_enforced_before_allocating() {
    let limits = small_limits();
    let too_many = b"*65\r\n".to_vec();
    assert_eq!(
        decode_in_pieces(limits, &too_many, &[100]),
        Err(ProtocolError::MultibulkLength)
    );
    let too_long = b"*1\r\n$1025\r\n".to_vec();
    assert_eq!(
        decode_in_pieces(limits, &too_long, &[100]),
        Err(ProtocolError::BulkLength)
    );
    // Many arguments, each within the bulk limit, over the request limit.
    let mut big = b"*20\r\n".to_vec();
    for _ in 0..20 {
        big.extend_from_slice(b"$1000\r\n");
        big.extend_from_slice(&[b'x'; 1000]);
        big.extend_from_slice(b"\r\n");
    }
    assert_eq!(
        decode_in_pieces(limits, &big, &[4096]),
        Err(ProtocolError::RequestTooLarge)
    );
    let endless_header = vec![b'*'; 1000];
    assert_eq!(
        decode_in_pieces(limits, &endless_header, &[100]),
        Err(ProtocolError::InlineTooLong)
    );
    let endless_inline = vec![b'a'; 1000];
    assert_eq!(
        decode_in_pieces(limits, &endless_inline, &[100]),
        Err(ProtocolError::InlineTooLong)
    );
    assert_eq!(
        decode_in_pieces(limits, b"*1\r\n$-1\r\n", &[100]),
        Err(ProtocolError::BulkLength)
    );
    assert_eq!(
        decode_in_pieces(limits, b"*1\r\n$3\r\nabcXY", &[100]),
        Err(ProtocolError::MissingCrlf)
    );
    assert!(matches!(
        decode_in_pieces(limits, b"*1\r\n:3\r\n", &[100]),
        Err(ProtocolError::UnexpectedByte { .. })
    ));
}

#[test]
fn inline_commands_split_at_blanks_and_empty_requests_are_skipped() {
    let got = decode_in_pieces(small_limits(), b"\r\n*0\r\nSET  a\tb\r\nPING\n", &[3]).unwrap();
    let got: Vec<Vec<&[u8]>> = got
        .iter()
        .map(|r| r.iter().map(|a| a.as_ref()).collect())
        .collect();
    assert_eq!(got, vec![vec![&b"SET"[..], b"a", b"b"], vec![&b"PING"[..]]]);
}
