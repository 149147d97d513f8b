//! The codec's one error type.

use crate::Compression;

/// Everything that can go wrong while decoding or encoding record batches.
///
/// Every decoding error names the batch by its base offset and its byte
/// position in the buffer handed to the decoder, so a corrupt batch in a
/// segment file or a fetch response can be found with a hex dump.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The batch is a legacy message set (magic 0 or 1) or an unknown format.
    #[error(
        "batch at offset {base_offset} (byte {position}) has magic {magic}: only record batches \
         (magic 2, Kafka 0.11+) are supported; legacy message sets (magic 0 and 1) are not"
    )]
    UnsupportedMagic {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// The magic byte found.
        magic: i8,
    },
    /// The batch header or framing is inconsistent.
    #[error("corrupt batch at offset {base_offset} (byte {position}): {what}")]
    CorruptBatch {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// What was wrong.
        what: String,
    },
    /// The CRC32C stored in the batch does not match its bytes.
    #[error(
        "corrupt batch at offset {base_offset} (byte {position}): CRC32C mismatch, the header \
         says {stored:#010x} but the bytes give {computed:#010x}"
    )]
    CrcMismatch {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// The attributes name a compression codec this library does not know.
    #[error(
        "batch at offset {base_offset} (byte {position}) uses unknown compression codec id {codec}"
    )]
    UnknownCompression {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// The codec id (attribute bits 0-2).
        codec: u8,
    },
    /// The compressed records of a batch could not be decompressed.
    #[error(
        "batch at offset {base_offset} (byte {position}): {codec} decompression failed: {source}"
    )]
    Decompress {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// The batch's codec.
        codec: Compression,
        /// The decompressor's error.
        #[source]
        source: std::io::Error,
    },
    /// Decompression produced more than the configured cap (a decompression bomb,
    /// or a cap set too low for the data).
    #[error(
        "batch at offset {base_offset} (byte {position}): {codec} records decompress to more than \
         the {limit}-byte cap (DecodeOptions::max_decompressed_bytes)"
    )]
    DecompressedTooLarge {
        /// Base offset of the batch.
        base_offset: i64,
        /// Byte position of the batch in the decoded buffer.
        position: usize,
        /// The batch's codec.
        codec: Compression,
        /// The cap that was exceeded.
        limit: usize,
    },
    /// A record inside a batch is malformed.
    #[error(
        "corrupt record #{index} of batch at offset {base_offset} (byte {position} of the batch's \
         {section}): {what}"
    )]
    CorruptRecord {
        /// Base offset of the batch.
        base_offset: i64,
        /// Zero-based index of the record within the batch.
        index: u32,
        /// Byte position of the record within `section`.
        position: usize,
        /// Which bytes `position` counts in.
        section: Section,
        /// What was wrong.
        what: &'static str,
    },
    /// The encoder was given input that cannot form a valid batch.
    #[error("cannot encode batch: {what}")]
    InvalidInput {
        /// What was wrong.
        what: String,
    },
    /// Compressing a batch failed.
    #[error("{codec} compression failed: {source}")]
    Compress {
        /// The codec.
        codec: Compression,
        /// The compressor's error.
        #[source]
        source: std::io::Error,
    },
    /// A record's per-record checksum header (see
    /// [`crate::RECORD_CHECKSUM_HEADER`]) does not match its key and value.
    #[error(
        "corrupt record at offset {offset}: its per-record checksum does not match its key and \
         value"
    )]
    RecordChecksumMismatch {
        /// The record's offset.
        offset: i64,
    },
}

/// The bytes a record position counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The uncompressed batch, from its first byte (the base offset field).
    Batch,
    /// The decompressed records of a compressed batch.
    DecompressedRecords,
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Section::Batch => "bytes",
            Section::DecompressedRecords => "decompressed records",
        })
    }
}
