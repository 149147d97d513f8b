//! Zstandard (KIP-110).

use std::cell::RefCell;
use std::io::{self, Read};

use bytes::{Buf, Bytes};
use zstd::bulk::Decompressor;

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
    with_decompressor(|decompressor| decompressor.decompress_to_buffer(data, &mut out))?.ok()?;
    Some(out)
}

thread_local! {
    /// This thread's one-shot decompression context, kept between batches:
    /// setting one up (some 100 KiB of tables and buffers) costs more than
    /// decompressing a small batch's records does.
    static DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's one-shot decompression context, set up on
/// first use. Every one-shot call starts a new frame with no dictionary and
/// default parameters, so what an earlier call did (or failed at) does not
/// carry over. `None` if no context can be had (it could not be created, or
/// the thread is exiting).
fn with_decompressor<T>(f: impl FnOnce(&mut Decompressor<'static>) -> T) -> Option<T> {
    DECOMPRESSOR
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let decompressor = match &mut *slot {
                Some(decompressor) => decompressor,
                empty => empty.insert(Decompressor::new().ok()?),
            };
            Some(f(decompressor))
        })
        .ok()
        .flatten()
}
