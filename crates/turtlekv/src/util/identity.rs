//! Database identities: random numbers fixed at creation that every data
//! file names (`docs/format.md`, "Database identity"), so that a file of
//! another database is refused instead of read as this one's.

use std::io;

/// A new random, non-zero identity from the kernel's generator.
pub(crate) fn new_database_id() -> io::Result<u64> {
    loop {
        let mut bytes = [0u8; 8];
        let mut filled = 0;
        while filled < bytes.len() {
            // SAFETY: the pointer and length describe the unfilled part of
            // `bytes`, which outlives the call.
            let n = unsafe {
                libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            filled += n as usize;
        }
        let id = u64::from_le_bytes(bytes);
        // Zero means "no identity" in every format that holds one.
        if id != 0 {
            return Ok(id);
        }
    }
}

/// The initial CRC32C state of a page block checksum seeded with `id`:
/// continuing from it is the CRC32C of the identity's 8 bytes followed by
/// the block's own fields.
pub(crate) fn checksum_seed(id: u64) -> u32 {
    crc32c::crc32c(&id.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_random_and_not_zero() {
        let a = new_database_id().unwrap();
        let b = new_database_id().unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }

    #[test]
    fn a_seed_prefixes_the_identity() {
        let id = 0x0123_4567_89ab_cdef_u64;
        let mut all = id.to_le_bytes().to_vec();
        all.extend_from_slice(b"block");
        assert_eq!(
            crc32c::crc32c_append(checksum_seed(id), b"block"),
            crc32c::crc32c(&all)
        );
    }
}
