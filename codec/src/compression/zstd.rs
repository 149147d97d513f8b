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
