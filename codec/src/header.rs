//! The record batch header (magic 2): the 61 bytes before the records.
//!
//! ```text
//! baseOffset: int64            (0)   partitionLeaderEpoch: int32 (12)
//! batchLength: int32           (8)   magic: int8                 (16)
//! crc: uint32                  (17)  attributes: int16           (21)
//! lastOffsetDelta: int32       (23)  baseTimestamp: int64        (27)
//! maxTimestamp: int64          (35)  producerId: int64           (43)
//! producerEpoch: int16         (51)  baseSequence: int32         (53)
//! recordCount: int32           (57)  records                     (61..)
//! ```
//!
//! `batchLength` counts the bytes after itself; the CRC32C covers everything
//! from `attributes` to the end of the batch.
//!
//! # References
//! - Kafka documentation, "Message Format" / "Record Batch" (KIP-98).

use crate::wire::Reader;

/// Bytes before `batchLength`'s count starts: `baseOffset` and `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the whole batch header, up to the first record.
pub const HEADER_LEN: usize = 61;
/// Byte position of the magic byte (the same in legacy message sets).
pub(crate) const MAGIC_POS: usize = 16;
/// Byte position of the CRC field.
pub(crate) const CRC_POS: usize = 17;
/// Byte position of the attributes field, where the CRC's coverage starts.
pub(crate) const ATTRIBUTES_POS: usize = 21;
/// The record batch format this codec reads and writes.
pub(crate) const MAGIC: i8 = 2;

/// A compression codec, from bits 0-2 of the batch attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Compression {
    /// Uncompressed records.
    #[default]
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy: raw blocks, or the xerial framing written by the Java client.
    Snappy,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// All codecs, for tests and benchmarks.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec for an attribute id, if known.
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The attribute id of this codec.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The name Kafka's `compression.type` uses.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!("unknown compression {s:?}: expected none, gzip, snappy, lz4 or zstd")
            })
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum TimestampType {
    /// Set by the producer.
    #[default]
    CreateTime,
    /// Set by the broker when it appended the batch.
    LogAppendTime,
}

/// The decoded `attributes` field of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attributes(pub i16);

impl Attributes {
    /// The compression codec id (bits 0-2); see [`Compression::from_id`].
    pub fn compression_id(self) -> u8 {
        (self.0 & 0x07) as u8
    }
    /// The timestamp type (bit 3).
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & 0x08 != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    /// Whether the batch belongs to a transaction (bit 4).
    pub fn is_transactional(self) -> bool {
        self.0 & 0x10 != 0
    }
    /// Whether the batch holds control records (bit 5).
    pub fn is_control(self) -> bool {
        self.0 & 0x20 != 0
    }
    /// Whether `baseTimestamp` is a delete horizon set by compaction (bit 6).
    pub fn has_delete_horizon(self) -> bool {
        self.0 & 0x40 != 0
    }

    /// Builds the attributes field from its parts.
    pub fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
    ) -> Self {
        let mut bits = i16::from(compression.id());
        if timestamp_type == TimestampType::LogAppendTime {
            bits |= 0x08;
        }
        if transactional {
            bits |= 0x10;
        }
        if control {
            bits |= 0x20;
        }
        Attributes(bits)
    }
}

/// Every field of a record batch header, read without touching the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchHeader {
    /// Offset of the first record (offset delta 0).
    pub base_offset: i64,
    /// Bytes of the batch after this field (the whole batch is this plus 12).
    pub batch_length: i32,
    /// Leader epoch of the partition leader that appended the batch.
    pub partition_leader_epoch: i32,
    /// Format version; always 2 for a decoded header.
    pub magic: i8,
    /// CRC32C over the batch from `attributes` to its end, as stored.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control flags.
    pub attributes: Attributes,
    /// Offset delta of the last record (the batch covers
    /// `base_offset ..= base_offset + last_offset_delta`).
    pub last_offset_delta: i32,
    /// Timestamp of the first record (or the delete horizon).
    pub base_timestamp: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp: i64,
    /// Producer id, or -1.
    pub producer_id: i64,
    /// Producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads a header from the first [`HEADER_LEN`] bytes of `buf`; `None`
    /// when fewer bytes are present. No field is validated here.
    pub fn parse(buf: &[u8]) -> Option<BatchHeader> {
        let mut r = Reader::new(buf.get(..HEADER_LEN)?);
        let mut parse = || -> Result<BatchHeader, crate::wire::ReadFault> {
            Ok(BatchHeader {
                base_offset: r.i64()?,
                batch_length: r.i32()?,
                partition_leader_epoch: r.i32()?,
                magic: r.i8()?,
                crc: r.u32()?,
                attributes: Attributes(r.i16()?),
                last_offset_delta: r.i32()?,
                base_timestamp: r.i64()?,
                max_timestamp: r.i64()?,
                producer_id: r.i64()?,
                producer_epoch: r.i16()?,
                base_sequence: r.i32()?,
                record_count: r.i32()?,
            })
        };
        parse().ok()
    }

    /// The batch's codec, if its id is known.
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_id(self.attributes.compression_id())
    }

    /// Offset of the last record the batch covers.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// Offset right after the batch: where a fetch for what follows starts.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Whole size of the batch on the wire, header included.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Whether the batch holds control records (transaction markers).
    pub fn is_control(&self) -> bool {
        self.attributes.is_control()
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes.is_transactional()
    }
}
