//! Splitting a buffer of record batches — the `records` field of a Fetch
//! response partition, or a log segment file — into batches.
//!
//! Two-phase: the framing (`baseOffset`, `batchLength`, magic) is checked
//! first, so a batch cut short by the broker's byte limit is told apart from a
//! corrupt one; only a complete batch is parsed further.
//!
//! # References
//! - Kafka protocol guide, Fetch API: "the server may return a partial
//!   message at the end of the message set"; KIP-74 (fetch `max_bytes`).

use bytes::Bytes;

use crate::header::{BatchHeader, ATTRIBUTES_POS, HEADER_LEN, LOG_OVERHEAD, MAGIC, MAGIC_POS};
use crate::{Compression, Error, RecordBatch, Records};

/// Default cap on the decompressed size of one batch's records: 64 MiB,
/// above Kafka's default `message.max.bytes` and fetch limits by a wide margin.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

/// How batches are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Check each batch's CRC32C (default: on).
    pub verify_crc: bool,
    /// Largest decompressed records section accepted from one batch; more is
    /// [`Error::DecompressedTooLarge`] (default:
    /// [`DEFAULT_MAX_DECOMPRESSED_BYTES`]).
    pub max_decompressed_bytes: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            verify_crc: true,
            max_decompressed_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
        }
    }
}

/// An iterator over the complete batches in a buffer.
///
/// It yields every complete batch in order and then ends; a trailing batch
/// cut short is not yielded but reported by [`Batches::partial`]. The first
/// error ends the iteration (everything before it was yielded).
///
/// ```
/// use walfetch_codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
///
/// let batch = BatchBuilder::new(100).encode(&[NewRecord::value(7, "hello")]).unwrap();
/// let mut buf = batch.bytes.to_vec();
/// buf.extend_from_slice(&batch.bytes[..20]); // a second batch, cut short
///
/// let mut batches = Batches::new(buf.into(), DecodeOptions::default());
/// let first = batches.next().unwrap().unwrap();
/// assert_eq!(first.header().base_offset, 100);
/// assert!(batches.next().is_none());
/// assert_eq!(batches.partial().unwrap().needed(), Some(batch.bytes.len()));
/// ```
#[derive(Debug, Clone)]
pub struct Batches {
    buf: Bytes,
    pos: usize,
    opts: DecodeOptions,
    partial: Option<PartialBatch>,
    failed: bool,
}

impl Batches {
    /// Iterates over the batches in `buf`.
    pub fn new(buf: Bytes, opts: DecodeOptions) -> Self {
        Self {
            buf,
            pos: 0,
            opts,
            partial: None,
            failed: false,
        }
    }

    /// The trailing batch cut short, once iteration has reached it.
    pub fn partial(&self) -> Option<&PartialBatch> {
        self.partial.as_ref()
    }

    /// Byte position of the next batch in the buffer: after iteration, the
    /// end of the last complete batch.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn fail(&mut self, err: Error) -> Option<Result<RecordBatch, Error>> {
        self.failed = true;
        Some(Err(err))
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.partial.is_some() || self.pos >= self.buf.len() {
            return None;
        }
        let position = self.pos;
        let rest = &self.buf[position..];
        let base_offset = rest
            .get(..8)
            .map(|b| i64::from_be_bytes(b.try_into().unwrap_or_default()));
        let batch_length = rest
            .get(8..LOG_OVERHEAD)
            .map(|b| i32::from_be_bytes(b.try_into().unwrap_or_default()));
        let (Some(base_offset), Some(batch_length)) = (base_offset, batch_length) else {
            self.partial = Some(PartialBatch::new(
                self.buf.slice(position..),
                position,
                base_offset,
                None,
                self.opts,
            ));
            return None;
        };
        if let Some(&magic) = rest.get(MAGIC_POS) {
            if magic as i8 != MAGIC {
                return self.fail(Error::UnsupportedMagic {
                    base_offset,
                    position,
                    magic: magic as i8,
                });
            }
        }
        let min_length = (HEADER_LEN - LOG_OVERHEAD) as i32;
        if batch_length < min_length {
            return self.fail(Error::CorruptBatch {
                base_offset,
                position,
                what: format!("batch length {batch_length} is below the {min_length}-byte minimum"),
            });
        }
        let total = LOG_OVERHEAD + batch_length as usize;
        if rest.len() < total {
            self.partial = Some(PartialBatch::new(
                self.buf.slice(position..),
                position,
                Some(base_offset),
                Some(total),
                self.opts,
            ));
            return None;
        }
        let bytes = self.buf.slice(position..position + total);
        match check_batch(bytes, base_offset, position, self.opts) {
            Ok(batch) => {
                self.pos += total;
                Some(Ok(batch))
            }
            Err(err) => self.fail(err),
        }
    }
}

/// Validates a complete batch's header and CRC.
fn check_batch(
    bytes: Bytes,
    base_offset: i64,
    position: usize,
    opts: DecodeOptions,
) -> Result<RecordBatch, Error> {
    let header = BatchHeader::parse(&bytes).ok_or_else(|| Error::CorruptBatch {
        base_offset,
        position,
        what: format!(
            "{} bytes cannot hold a {HEADER_LEN}-byte header",
            bytes.len()
        ),
    })?;
    let corrupt = |what: String| Error::CorruptBatch {
        base_offset: header.base_offset,
        position,
        what,
    };
    if opts.verify_crc {
        let computed = crc32c::crc32c(&bytes[ATTRIBUTES_POS..]);
        if computed != header.crc {
            return Err(Error::CrcMismatch {
                base_offset: header.base_offset,
                position,
                stored: header.crc,
                computed,
            });
        }
    }
    if header.record_count < 0 {
        return Err(corrupt(format!(
            "negative record count {}",
            header.record_count
        )));
    }
    if header.last_offset_delta < 0 {
        return Err(corrupt(format!(
            "negative last offset delta {}",
            header.last_offset_delta
        )));
    }
    let Some(compression) = header.compression() else {
        return Err(Error::UnknownCompression {
            base_offset: header.base_offset,
            position,
            codec: header.attributes.compression_id(),
        });
    };
    Ok(RecordBatch::new(header, compression, bytes, position, opts))
}

/// A trailing batch cut short: the broker stopped at its byte limit, or a
/// segment file was copied while being written.
#[derive(Debug, Clone)]
pub struct PartialBatch {
    bytes: Bytes,
    position: usize,
    base_offset: Option<i64>,
    needed: Option<usize>,
    opts: DecodeOptions,
}

impl PartialBatch {
    fn new(
        bytes: Bytes,
        position: usize,
        base_offset: Option<i64>,
        needed: Option<usize>,
        opts: DecodeOptions,
    ) -> Self {
        Self {
            bytes,
            position,
            base_offset,
            needed,
            opts,
        }
    }

    /// Byte position of the batch in the decoded buffer.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The bytes that are present.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// How many bytes are present.
    pub fn present(&self) -> usize {
        self.bytes.len()
    }

    /// The whole batch's size, when its length field is present.
    pub fn needed(&self) -> Option<usize> {
        self.needed
    }

    /// The batch's base offset, when its first 8 bytes are present.
    pub fn base_offset(&self) -> Option<i64> {
        self.base_offset
    }

    /// The batch header, when all of its 61 bytes are present. Its CRC cannot
    /// be checked.
    pub fn header(&self) -> Option<BatchHeader> {
        BatchHeader::parse(&self.bytes)
    }

    /// The complete records in the present prefix of an uncompressed batch,
    /// for a caller that accepts records whose CRC cannot be checked (the
    /// records after them are missing). `None` when the header is not
    /// complete or the batch is compressed.
    pub fn records_unverified(&self) -> Option<Records> {
        let header = self.header()?;
        if header.compression() != Some(Compression::None) || header.record_count < 0 {
            return None;
        }
        Some(Records::prefix(header, self.bytes.clone(), self.opts))
    }
}
