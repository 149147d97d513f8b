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

use crate::{Header, Record, RecordRef};

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

/// Checks a record (its key, value and headers) against its per-record
/// checksum header, if it has one. The first header of that key counts.
fn check<'a>(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    mut headers: impl Iterator<Item = Header<'a>>,
) -> RecordCheck {
    let Some(header) = headers.find(|h| h.key == RECORD_CHECKSUM_HEADER.as_bytes()) else {
        return RecordCheck::Missing;
    };
    match header.value {
        Some(v) if v == record_checksum_header(key, value) => RecordCheck::Verified,
        _ => RecordCheck::Mismatch,
    }
}

impl Record {
    /// What the record's per-record checksum header says of it.
    pub fn check_checksum(&self) -> RecordCheck {
        check(self.key(), self.value(), self.headers())
    }
}

impl RecordRef<'_> {
    /// What the record's per-record checksum header says of it.
    pub fn check_checksum(&self) -> RecordCheck {
        check(self.key(), self.value(), self.headers())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::{BatchBuilder, Batches, DecodeOptions, NewRecord};

    /// One record with `headers`, encoded and decoded again.
    fn decoded(value: &'static [u8], headers: Vec<(Bytes, Option<Bytes>)>) -> Record {
        let record = NewRecord {
            key: Some(Bytes::from_static(b"k")),
            headers,
            ..NewRecord::value(0, value)
        };
        let batch = BatchBuilder::new(0).encode(&[record]).unwrap();
        let mut batches = Batches::new(batch.bytes, DecodeOptions::default());
        let batch = batches.next().unwrap().unwrap();
        let mut records = batch.records().unwrap();
        records.next().unwrap().unwrap()
    }

    fn header(value: &[u8]) -> (Bytes, Option<Bytes>) {
        (
            Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
            Some(Bytes::copy_from_slice(value)),
        )
    }

    #[test]
    fn a_record_is_verified_missing_or_mismatched() {
        let good = record_checksum_header(Some(b"k"), Some(b"value"));
        assert_eq!(
            decoded(b"value", vec![header(&good)]).check_checksum(),
            RecordCheck::Verified
        );
        assert_eq!(
            decoded(b"value", vec![]).check_checksum(),
            RecordCheck::Missing
        );
        // The value changed after the checksum was taken.
        assert_eq!(
            decoded(b"valuE", vec![header(&good)]).check_checksum(),
            RecordCheck::Mismatch
        );
        // A header of the wrong length, or null.
        assert_eq!(
            decoded(b"value", vec![header(&good[..3])]).check_checksum(),
            RecordCheck::Mismatch
        );
        let null = (Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()), None);
        assert_eq!(
            decoded(b"value", vec![null]).check_checksum(),
            RecordCheck::Mismatch
        );
    }

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
