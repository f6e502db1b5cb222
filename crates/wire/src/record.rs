//! Records: the unit of encryption on a path connection.
//!
//! A record on the wire is `len: u16 (big endian) | ciphertext | tag (16 bytes)`, where
//! `len` counts ciphertext and tag. Its plaintext is one or more whole frames (frames never
//! span records, so a receiver decodes every record on its own). A sender lays records out
//! in its output buffer with [`begin`] and [`end`] and seals them in place afterwards,
//! outside any lock; a receiver reads [`peek_len`] to know when a whole record is in.

use crate::{WireError, MAX_RECORD};

/// Bytes of the length prefix.
pub const LEN_PREFIX: usize = 2;
/// Bytes of the authentication tag (AES-GCM).
pub const TAG_LEN: usize = 16;

/// Starts a record at the end of `out`; append its plaintext, then call [`end`]. Returns
/// where the record starts.
pub fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_PREFIX]);
    start
}

/// Ends the record begun at `start`: writes its length and reserves room for its tag.
/// Returns where it ends. Panics if the plaintext exceeds [`MAX_RECORD`] (the caller
/// bounds what it appends).
pub fn end(out: &mut Vec<u8>, start: usize) -> usize {
    let plain = out.len() - start - LEN_PREFIX;
    assert!(plain <= MAX_RECORD, "record of {plain} bytes exceeds {MAX_RECORD}");
    out.extend_from_slice(&[0; TAG_LEN]);
    let len = (plain + TAG_LEN) as u16;
    out[start..start + LEN_PREFIX].copy_from_slice(&len.to_be_bytes());
    out.len()
}

/// The length of the record at the front of `buf` (ciphertext and tag, the prefix not
/// included), once its prefix is in.
pub fn peek_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < LEN_PREFIX {
        return Ok(None);
    }
    let n = u16::from_be_bytes([buf[0], buf[1]]) as usize;
    if n < TAG_LEN {
        return Err(WireError::Malformed {
            frame: "record",
            what: "shorter than its tag",
        });
    }
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_laid_out_with_its_length_and_tag_room() {
        let mut out = vec![9u8];
        let start = begin(&mut out);
        out.extend_from_slice(b"hello");
        let end = end(&mut out, start);
        assert_eq!(end - start, LEN_PREFIX + 5 + TAG_LEN);
        assert_eq!(peek_len(&out[start..]), Ok(Some(5 + TAG_LEN)));
        assert_eq!(crate::RECORD_OVERHEAD, LEN_PREFIX + TAG_LEN);
    }

    #[test]
    fn a_record_shorter_than_a_tag_is_malformed() {
        assert!(peek_len(&[0, 15]).is_err());
        assert_eq!(peek_len(&[0]), Ok(None));
    }
}
