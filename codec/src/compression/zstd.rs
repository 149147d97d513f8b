//! Zstandard (KIP-110).

use std::io::{self, Read};

use bytes::{Buf, Bytes};

/// A streaming decoder whose window may not exceed the decompressed-size cap
/// (the window is the largest buffer a zstd frame can make a decoder
/// allocate), or 8 MiB for small caps so that frames from ordinary
/// compressors still decode far enough to report the cap itself.
pub(super) fn reader(data: Bytes, limit: usize) -> io::Result<Box<dyn Read + Send>> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(data.reader())?;
    // ceil(log2(limit)): the smallest window that can hold `limit` bytes.
    let window_log = usize::BITS - limit.saturating_sub(1).leading_zeros();
    decoder.window_log_max(window_log.clamp(23, 31))?;
    Ok(Box::new(decoder))
}

pub(super) fn compress(data: &[u8]) -> io::Result<Vec<u8>> {
    // Level 3 is zstd's default and what the Java client uses by default.
    zstd::bulk::compress(data, 3)
}

/// The content size the first frame's header states, when it states one.
pub(super) fn stated_len(data: &[u8]) -> Option<usize> {
    let size = zstd::zstd_safe::get_frame_content_size(data).ok()??;
    usize::try_from(size).ok()
}

/// One-shot decompression of a payload whose first frame states a content
/// size of at most `limit`, into a buffer of exactly that size. `None` when
/// the size is not stated or over `limit`, or when the payload does not
/// decompress into exactly it (more frames, damage): the caller then streams
/// it, which reports what was wrong.
pub(super) fn decompress_whole(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let size = stated_len(data).filter(|&size| size <= limit)?;
    let mut out = Vec::with_capacity(size);
    let mut decompressor = zstd::bulk::Decompressor::new().ok()?;
    decompressor.decompress_to_buffer(data, &mut out).ok()?;
    Some(out)
}
