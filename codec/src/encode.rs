//! Building record batches (magic 2): for writers, tests and fixtures.

use std::ops::Range;

use bytes::Bytes;

use crate::compression::{self, CompressOptions};
use crate::header::{ATTRIBUTES_POS, CRC_POS, HEADER_LEN, LOG_OVERHEAD, MAGIC};
use crate::wire::{put_varint, put_varlong, varint_len, varlong_len};
use crate::{
    Attributes, BatchHeader, Compression, ControlRecord, ControlType, Error, SnappyFraming,
    TimestampType,
};

/// A record to encode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// Offset relative to the batch's base offset. Deltas must increase
    /// strictly within a batch; gaps are allowed (as after compaction).
    pub offset_delta: i32,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
    /// The key, or `None` for null.
    pub key: Option<Bytes>,
    /// The value, or `None` for null.
    pub value: Option<Bytes>,
    /// Headers, in order: key and optional value.
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

impl NewRecord {
    /// A record with a value and no key or headers, at offset delta
    /// `offset_delta` and timestamp 0.
    pub fn value(offset_delta: i32, value: impl Into<Bytes>) -> Self {
        Self {
            offset_delta,
            value: Some(value.into()),
            ..Self::default()
        }
    }
}

/// A batch as encoded, with where each record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    /// The whole batch, ready to append to a log or put in a Produce request.
    pub bytes: Bytes,
    /// The header written.
    pub header: BatchHeader,
    /// For each record, its byte range (length varint included): inside
    /// [`EncodedBatch::bytes`] when the batch is uncompressed, inside the
    /// decompressed records section otherwise.
    pub record_ranges: Vec<Range<usize>>,
}

impl EncodedBatch {
    /// Where record `i` ends inside the batch, when the batch is
    /// uncompressed: the byte count a fetch needs to get records `..=i`.
    pub fn record_end_in_batch(&self, i: usize) -> Option<usize> {
        let compressed = self.header.attributes.compression_id() != Compression::None.id();
        (!compressed)
            .then(|| self.record_ranges.get(i).map(|r| r.end))
            .flatten()
    }
}

/// Builds one record batch: header fields set here, records given to
/// [`BatchBuilder::encode`].
///
/// ```
/// use walfetch_codec::{BatchBuilder, Compression, NewRecord};
///
/// let batch = BatchBuilder::new(42)
///     .compression(Compression::Zstd)
///     .encode(&[NewRecord::value(0, "a"), NewRecord::value(1, "b")])
///     .unwrap();
/// assert_eq!(batch.header.last_offset(), 43);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct BatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    compression: Compression,
    snappy_framing: SnappyFraming,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl BatchBuilder {
    /// A builder for an uncompressed, non-transactional batch at `base_offset`
    /// (a producer sends 0; the broker assigns the real offset).
    pub fn new(base_offset: i64) -> Self {
        Self {
            base_offset,
            partition_leader_epoch: -1,
            compression: Compression::None,
            snappy_framing: SnappyFraming::Xerial,
            timestamp_type: TimestampType::CreateTime,
            transactional: false,
            control: false,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }

    /// Sets the compression codec.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets how snappy output is framed.
    pub fn snappy_framing(mut self, framing: SnappyFraming) -> Self {
        self.snappy_framing = framing;
        self
    }

    /// Sets the timestamp type.
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Sets the partition leader epoch.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets the producer id, epoch and base sequence (idempotent producers).
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction.
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Marks the batch as a control batch.
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Encodes a transaction marker batch (a transactional control batch with
    /// one control record) for this builder's producer.
    pub fn encode_marker(
        self,
        kind: ControlType,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Result<EncodedBatch, Error> {
        let record = NewRecord {
            offset_delta: 0,
            timestamp,
            key: Some(Bytes::copy_from_slice(&ControlRecord::key(kind))),
            value: Some(Bytes::copy_from_slice(&ControlRecord::marker_value(
                coordinator_epoch,
            ))),
            headers: Vec::new(),
        };
        self.transactional(true).control(true).encode(&[record])
    }

    /// Encodes `records` into one batch, computing lengths and the CRC.
    pub fn encode(&self, records: &[NewRecord]) -> Result<EncodedBatch, Error> {
        let hint = records.iter().map(NewRecord::encoded_len_hint).sum();
        let mut body = RecordsBuffer::with_capacity(hint);
        for record in records {
            body.push(record)?;
        }
        self.encode_records(&body)
    }

    /// Encodes records already written into a [`RecordsBuffer`] into one
    /// batch: the header, and the records compressed (or copied) after it.
    pub fn encode_records(&self, records: &RecordsBuffer) -> Result<EncodedBatch, Error> {
        let (Some(last_offset_delta), Some(base_timestamp)) =
            (records.last_delta, records.base_timestamp)
        else {
            return Err(Error::InvalidInput {
                what: "a batch needs at least one record".into(),
            });
        };
        if self
            .base_offset
            .checked_add(i64::from(last_offset_delta))
            .is_none()
        {
            return Err(Error::InvalidInput {
                what: format!(
                    "base offset {} plus offset delta {last_offset_delta} overflows an i64",
                    self.base_offset
                ),
            });
        }
        // The header is written last, over room left for it at the front:
        // uncompressed records are copied after it, compressed ones are
        // compressed straight after it.
        let body = &records.body;
        let mut record_ranges = records.ranges.clone();
        let mut out;
        if self.compression == Compression::None {
            out = Vec::with_capacity(HEADER_LEN + body.len());
            out.resize(HEADER_LEN, 0);
            out.extend_from_slice(body);
            for range in &mut record_ranges {
                *range = range.start + HEADER_LEN..range.end + HEADER_LEN;
            }
        } else {
            out = Vec::with_capacity(HEADER_LEN + body.len() / 2 + 64);
            out.resize(HEADER_LEN, 0);
            let opts = CompressOptions {
                snappy_framing: self.snappy_framing,
            };
            compression::compress_into(self.compression, body, opts, &mut out).map_err(
                |source| Error::Compress {
                    codec: self.compression,
                    source,
                },
            )?;
        }
        let payload_len = out.len() - HEADER_LEN;
        let batch_length =
            i32::try_from(HEADER_LEN - LOG_OVERHEAD + payload_len).map_err(|_| {
                Error::InvalidInput {
                    what: format!("{payload_len} bytes of records do not fit a batch"),
                }
            })?;
        let record_count = i32::try_from(records.len()).map_err(|_| Error::InvalidInput {
            what: "too many records for one batch".into(),
        })?;
        let header = BatchHeader {
            base_offset: self.base_offset,
            batch_length,
            partition_leader_epoch: self.partition_leader_epoch,
            magic: MAGIC,
            crc: 0,
            attributes: Attributes::new(
                self.compression,
                self.timestamp_type,
                self.transactional,
                self.control,
            ),
            last_offset_delta,
            base_timestamp,
            max_timestamp: records.max_timestamp,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            record_count,
        };
        write_header(&mut out[..HEADER_LEN], &header);
        let crc = crc32c::crc32c(&out[ATTRIBUTES_POS..]);
        out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(EncodedBatch {
            bytes: out.into(),
            header: BatchHeader { crc, ..header },
            record_ranges,
        })
    }
}

/// A batch's records section, written one record at a time as they come,
/// for [`BatchBuilder::encode_records`]. A producer that gathers records
/// for a while before sending them (Kafka's Java producer writes each into
/// its batch as it is sent) so touches each record's bytes while they are
/// fresh, and later compresses one contiguous buffer.
///
/// Timestamps are stored relative to the first record's, which becomes
/// the batch's base timestamp.
///
/// ```
/// use walfetch_codec::{BatchBuilder, Compression, NewRecord, RecordsBuffer};
///
/// let mut records = RecordsBuffer::default();
/// records.push(&NewRecord::value(0, "a")).unwrap();
/// records.push(&NewRecord::value(1, "b")).unwrap();
/// let batch = BatchBuilder::new(7).compression(Compression::Lz4).encode_records(&records).unwrap();
/// assert_eq!(batch.header.record_count, 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordsBuffer {
    body: Vec<u8>,
    /// Each record's byte range in `body` (length varint included).
    ranges: Vec<Range<usize>>,
    last_delta: Option<i32>,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
}

impl RecordsBuffer {
    /// An empty buffer with room for `bytes` of records.
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            body: Vec::with_capacity(bytes),
            ..Self::default()
        }
    }

    /// Writes `record` after the others. Its offset delta must be above the
    /// previous record's (the first's at least 0); nothing is written when
    /// it is not, or when a field is too long for a record.
    pub fn push(&mut self, record: &NewRecord) -> Result<(), Error> {
        let delta = record.offset_delta;
        match self.last_delta {
            None if delta < 0 => {
                return Err(Error::InvalidInput {
                    what: format!("offset delta {delta} is negative"),
                })
            }
            Some(last) if delta <= last => {
                return Err(Error::InvalidInput {
                    what: format!("offset deltas must increase: {delta} follows {last}"),
                })
            }
            _ => {}
        }
        let base = self.base_timestamp.unwrap_or(record.timestamp);
        let start = self.body.len();
        if let Err(e) = write_record(&mut self.body, record, base) {
            self.body.truncate(start);
            return Err(e);
        }
        self.ranges.push(start..self.body.len());
        self.last_delta = Some(delta);
        self.base_timestamp = Some(base);
        self.max_timestamp = match self.ranges.len() {
            1 => record.timestamp,
            _ => self.max_timestamp.max(record.timestamp),
        };
        Ok(())
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The records' encoded bytes, before compression.
    pub fn encoded_len(&self) -> usize {
        self.body.len()
    }
}

impl NewRecord {
    fn encoded_len_hint(&self) -> usize {
        let field = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len) + 5;
        16 + field(&self.key)
            + field(&self.value)
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + 5 + field(v))
                .sum::<usize>()
    }
}

/// Writes `h` over `out`, the batch's first [`HEADER_LEN`] bytes.
fn write_header(out: &mut [u8], h: &BatchHeader) {
    let fields: [&[u8]; 13] = [
        &h.base_offset.to_be_bytes(),
        &h.batch_length.to_be_bytes(),
        &h.partition_leader_epoch.to_be_bytes(),
        &[h.magic as u8],
        &h.crc.to_be_bytes(),
        &h.attributes.0.to_be_bytes(),
        &h.last_offset_delta.to_be_bytes(),
        &h.base_timestamp.to_be_bytes(),
        &h.max_timestamp.to_be_bytes(),
        &h.producer_id.to_be_bytes(),
        &h.producer_epoch.to_be_bytes(),
        &h.base_sequence.to_be_bytes(),
        &h.record_count.to_be_bytes(),
    ];
    let mut at = 0;
    for field in fields {
        out[at..at + field.len()].copy_from_slice(field);
        at += field.len();
    }
    debug_assert_eq!(at, out.len());
}

fn len_i32(len: usize, what: &str) -> Result<i32, Error> {
    i32::try_from(len).map_err(|_| Error::InvalidInput {
        what: format!("{what} of {len} bytes is too long for a record"),
    })
}

/// The bytes a nullable field takes in a record: its length and itself.
fn nullable_len(field: Option<&Bytes>, what: &str) -> Result<usize, Error> {
    Ok(match field {
        None => 1,
        Some(b) => varint_len(len_i32(b.len(), what)?) + b.len(),
    })
}

fn write_nullable(out: &mut Vec<u8>, field: Option<&Bytes>) {
    match field {
        // Lengths were checked by `nullable_len`.
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Appends `record`, its length first. The length is worked out before
/// anything is written, so that the key, value and headers are copied
/// once, straight into `out`, and a field too long for a record leaves
/// `out` as it was.
fn write_record(out: &mut Vec<u8>, record: &NewRecord, base_timestamp: i64) -> Result<(), Error> {
    let timestamp_delta = record.timestamp.wrapping_sub(base_timestamp);
    let headers = len_i32(record.headers.len(), "header list")?;
    let mut body = 1 // attributes
        + varlong_len(timestamp_delta)
        + varint_len(record.offset_delta)
        + nullable_len(record.key.as_ref(), "key")?
        + nullable_len(record.value.as_ref(), "value")?
        + varint_len(headers);
    for (key, value) in &record.headers {
        body += varint_len(len_i32(key.len(), "header key")?)
            + key.len()
            + nullable_len(value.as_ref(), "header value")?;
    }
    let len = len_i32(body, "record")?;
    out.reserve(varint_len(len) + body);
    let start = out.len();
    put_varint(out, len);
    out.push(0); // attributes: unused
    put_varlong(out, timestamp_delta);
    put_varint(out, record.offset_delta);
    write_nullable(out, record.key.as_ref());
    write_nullable(out, record.value.as_ref());
    put_varint(out, headers);
    for (key, value) in &record.headers {
        put_varint(out, key.len() as i32);
        out.extend_from_slice(key);
        write_nullable(out, value.as_ref());
    }
    debug_assert_eq!(out.len() - start, varint_len(len) + body);
    Ok(())
}
