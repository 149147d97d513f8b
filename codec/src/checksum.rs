//! The per-record checksum: a record header that lets a reader check one
//! record without the rest of its batch.
//!
//! A batch's CRC covers the whole batch, so a reader that stops inside a
//! batch (to save bytes) cannot check the records it keeps. A writer that
//! adds the header [`RECORD_CHECKSUM_HEADER`] to each record makes those
//! records checkable on their own: its value is 4 bytes, the big-endian
//! CRC32C (Castagnoli, the polynomial of the batch CRC) of
//!
//! ```text
//! key length (i32, big-endian; -1 for a null key) ++ key bytes
//! ++ value length (i32, big-endian; -1 for a null value) ++ value bytes
//! ```
//!
//! The lengths keep a null key apart from an empty one, and a key's tail
//! apart from the value's head. Other headers, the timestamp and the offset
//! are not covered.

use crate::RecordRef;

/// The header key of the per-record checksum.
pub const RECORD_CHECKSUM_HEADER: &str = "walfetch.crc32c";

/// The per-record checksum of a record with this key and value.
pub fn record_checksum(key: Option<&[u8]>, value: Option<&[u8]>) -> u32 {
    let mut crc = 0;
    for field in [key, value] {
        let len = field.map_or(-1, |f| i32::try_from(f.len()).unwrap_or(i32::MAX));
        crc = crc32c::crc32c_append(crc, &len.to_be_bytes());
        if let Some(bytes) = field {
            crc = crc32c::crc32c_append(crc, bytes);
        }
    }
    crc
}

/// The header value (4 bytes) for a record with this key and value.
pub fn record_checksum_header(key: Option<&[u8]>, value: Option<&[u8]>) -> [u8; 4] {
    record_checksum(key, value).to_be_bytes()
}

/// What a record's per-record checksum says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordCheck {
    /// The record carries the header and it matches.
    Verified,
    /// The record carries no checksum header.
    Missing,
    /// The record carries the header and it does not match (or is not 4
    /// bytes): the record is corrupt.
    Mismatch,
}

/// Checks `record` against its per-record checksum header, if it has one.
/// The first header of that key counts.
pub fn check_record(record: &RecordRef<'_>) -> RecordCheck {
    let Some(header) = record
        .headers()
        .find(|h| h.key == RECORD_CHECKSUM_HEADER.as_bytes())
    else {
        return RecordCheck::Missing;
    };
    let expected = record_checksum_header(record.key(), record.value());
    match header.value {
        Some(v) if v == expected => RecordCheck::Verified,
        _ => RecordCheck::Mismatch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_differ_and_fields_do_not_run_together() {
        assert_ne!(
            record_checksum(None, None),
            record_checksum(Some(b""), None)
        );
        assert_ne!(
            record_checksum(Some(b"ab"), Some(b"c")),
            record_checksum(Some(b"a"), Some(b"bc"))
        );
    }

    #[test]
    fn the_checksum_is_crc32c_of_the_length_prefixed_fields() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.push(b'k');
        bytes.extend_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(record_checksum(Some(b"k"), None), crc32c::crc32c(&bytes));
    }
}
