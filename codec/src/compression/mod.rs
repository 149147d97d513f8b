//! The compression codecs Kafka allows for the records of a batch.
//!
//! Decompression is streaming where the format allows (gzip, LZ4 frames,
//! zstd, xerial-framed snappy): the record iterator pulls decompressed bytes
//! only as far as it needs them, so a bounded iteration that stops early
//! stops decompressing too. Raw snappy is one block and is decompressed whole.
//!
//! # References
//! - Kafka documentation, `compression.type`; KIP-110 (zstd); KIP-57 (LZ4
//!   frame header checksum).

mod gzip;
mod lz4;
mod snappy;
mod zstd;

use std::io::{self, Read};

use bytes::{Buf, Bytes};

pub use snappy::SnappyFraming;

use crate::Compression;

/// The decompressed records of a batch, whole, as a stream, or not started.
pub(crate) enum Decompressed {
    /// All decompressed bytes, already in one buffer.
    Whole(Bytes),
    /// A reader producing the decompressed bytes on demand.
    Stream(Box<dyn Read + Send>),
    /// The compressed bytes, untouched: opening their stream (see [`open`])
    /// only sets up a decoder and cannot fail on the data, so it waits for
    /// the first read, and a batch decompressed at once by
    /// [`decompress_whole`] never sets one up.
    Deferred(Bytes),
}

/// Starts decompressing `data`, compressed with `codec`. `limit` is the
/// decompressed-size cap, checked up front where the format states the size.
/// Only snappy does work here (it checks the framing, or decompresses a raw
/// block); gzip, LZ4 and zstd are [`Decompressed::Deferred`].
pub(crate) fn decompress(
    codec: Compression,
    data: Bytes,
    limit: usize,
) -> io::Result<Decompressed> {
    match codec {
        Compression::None => Ok(Decompressed::Whole(data)),
        Compression::Snappy => snappy::decompress(data, limit),
        Compression::Gzip | Compression::Lz4 | Compression::Zstd => {
            Ok(Decompressed::Deferred(data))
        }
    }
}

/// A reader decompressing `data`, compressed with `codec`: the stream of a
/// [`Decompressed::Deferred`] payload, opened when it is first read.
pub(crate) fn open(
    codec: Compression,
    data: Bytes,
    limit: usize,
) -> io::Result<Box<dyn Read + Send>> {
    match codec {
        Compression::None => Ok(Box::new(data.reader())),
        Compression::Gzip => Ok(gzip::reader(data)),
        Compression::Snappy => Ok(match snappy::decompress(data, limit)? {
            Decompressed::Stream(reader) => reader,
            Decompressed::Whole(data) | Decompressed::Deferred(data) => Box::new(data.reader()),
        }),
        Compression::Lz4 => Ok(lz4::reader(data)),
        Compression::Zstd => zstd::reader(data, limit),
    }
}

/// Largest decompressed-to-compressed ratio [`decompressed_len_hint`]
/// believes: a forged length field costs at most this much memory up front.
const MAX_HINT_RATIO: usize = 256;

/// The size `data` will likely decompress to, to size the output buffer once:
/// the length the format states where it states one (gzip's `ISIZE`, a zstd
/// frame's content size, the xerial snappy blocks' lengths), else four times
/// the compressed size. Only a hint: the caller still caps what it reads.
pub(crate) fn decompressed_len_hint(codec: Compression, data: &[u8]) -> usize {
    let stated = match codec {
        Compression::Gzip => gzip::stated_len(data),
        Compression::Snappy => snappy::stated_len(data),
        Compression::Zstd => zstd::stated_len(data),
        Compression::None | Compression::Lz4 => None,
    };
    stated
        .unwrap_or(data.len().saturating_mul(4))
        .min(data.len().saturating_mul(MAX_HINT_RATIO))
}

/// Decompresses all of `data` at once where the codec does that better than
/// through `Read`: zstd goes straight into a buffer of the size its frame
/// states, or of zstd's bound for it where the frame does not state it (no
/// window buffer to copy out of, no zeroing); LZ4 blocks are appended as
/// decoded (no zeroing), starting from `capacity`. Nothing past `limit` is
/// produced. `None` means "stream it instead", which also reports what was
/// wrong, if anything.
pub(crate) fn decompress_whole(
    codec: Compression,
    data: &Bytes,
    limit: usize,
    capacity: usize,
) -> Option<Vec<u8>> {
    match codec {
        Compression::Zstd => zstd::decompress_whole(data, limit),
        Compression::Lz4 => lz4::decompress_whole(data, limit, capacity),
        Compression::None | Compression::Gzip | Compression::Snappy => None,
    }
}

/// Options for compressing a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CompressOptions {
    /// How snappy-compressed records are framed.
    pub(crate) snappy_framing: SnappyFraming,
}

/// Compresses the records section of a batch, appending it to `out`.
pub(crate) fn compress_into(
    codec: Compression,
    data: &[u8],
    opts: CompressOptions,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let whole = match codec {
        Compression::None => {
            out.extend_from_slice(data);
            return Ok(());
        }
        Compression::Lz4 => return lz4::compress_into(data, out),
        Compression::Gzip => gzip::compress(data)?,
        Compression::Snappy => snappy::compress(data, opts.snappy_framing)?,
        Compression::Zstd => zstd::compress(data)?,
    };
    out.extend_from_slice(&whole);
    Ok(())
}
