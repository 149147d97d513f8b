//! One complete, validated record batch.

use std::ops::{Bound, RangeBounds};

use bytes::Bytes;

use crate::{BatchHeader, Compression, ControlRecord, DecodeOptions, Error, Records};

/// A complete record batch whose framing, header and (by default) CRC were
/// checked. Its records are decoded only when iterated.
#[derive(Debug, Clone)]
pub struct RecordBatch {
    header: BatchHeader,
    compression: Compression,
    bytes: Bytes,
    position: usize,
    opts: DecodeOptions,
}

impl RecordBatch {
    pub(crate) fn new(
        header: BatchHeader,
        compression: Compression,
        bytes: Bytes,
        position: usize,
        opts: DecodeOptions,
    ) -> Self {
        Self {
            header,
            compression,
            bytes,
            position,
            opts,
        }
    }

    /// The batch header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch's compression codec.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The whole batch as it was on the wire (a slice of the decoded buffer).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Byte position of the batch in the decoded buffer.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    /// Offset of the last record the batch covers.
    pub fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }

    /// Iterates over all records.
    pub fn records(&self) -> Result<Records, Error> {
        self.records_in(..)
    }

    /// Iterates over the records whose offsets fall in `range`: records below
    /// it are skipped after reading three varints, and iteration stops at the
    /// first record past it without decoding (or, for a compressed batch,
    /// decompressing) any further.
    pub fn records_in(&self, range: impl RangeBounds<i64>) -> Result<Records, Error> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => i64::MIN,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e,
            Bound::Excluded(&e) => e.saturating_sub(1),
            Bound::Unbounded => i64::MAX,
        };
        Records::complete(self, start, end, self.opts)
    }

    /// For a control batch, its control record (a transaction marker or a
    /// KRaft record); `None` for a data batch, and for a control batch with
    /// no record. Kafka's log cleaner keeps a producer's last transaction
    /// marker as such an empty batch once the marker's delete horizon has
    /// passed: it marks nothing, neither a commit nor an abort (Java's
    /// consumer reads it so too).
    pub fn control_record(&self) -> Result<Option<ControlRecord>, Error> {
        if !self.header.is_control() {
            return Ok(None);
        }
        // A batch yields exactly its record count of records, or an error.
        self.records()?
            .next()
            .map(|record| ControlRecord::parse(&record?, &self.header))
            .transpose()
    }
}
