//! Zstandard (KIP-110).

use std::cell::RefCell;
use std::io::{self, Read};

use bytes::{Buf, Bytes};
use zstd::zstd_safe::{self, DCtx};

/// A streaming decoder whose window may not exceed the decompressed-size cap
/// (the window is the largest buffer a zstd frame can make a decoder
/// allocate), or 8 MiB for small caps so that frames from ordinary
/// compressors still decode far enough to report the cap itself.
///
/// A new decoder each time, unlike the one-shot context: a streaming
/// context keeps the buffers earlier frames made it allocate, and how a
/// damaged frame fails (or even whether it does) depends on their size, so
/// a kept one would decode the same bytes differently from one payload to
/// the next.
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
    let size = zstd_safe::get_frame_content_size(data).ok()??;
    usize::try_from(size).ok()
}

/// One-shot decompression of a payload, with this thread's kept context,
/// straight into the output buffer (no window buffer, nothing zeroed).
/// A payload whose first frame states a content size of at most `limit`
/// goes into a buffer of exactly that size. One whose frames do not state
/// it (streaming compressors leave it out: the Java client's, rskafka's,
/// which GreptimeDB writes with, and kafka-protocol's) goes into a buffer
/// of zstd's bound for it (its blocks' most, see `ZSTD_decompressBound`),
/// at most `limit` bytes, shrunk after when the bound was well over what
/// came out. `None` when the stated size is over `limit`, when the output
/// would pass `limit`, or when the payload does not decompress cleanly
/// (damage, a frame cut short, more than the stated size): the caller then
/// streams it, which reports what was wrong.
pub(super) fn decompress_whole(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let capacity = match stated_len(data) {
        Some(size) if size > limit => return None,
        Some(size) => size,
        // No frame at all: a stream over it reports the frame missing.
        None if data.is_empty() => return None,
        None => {
            let bound = zstd_safe::decompress_bound(data).ok()?;
            usize::try_from(bound).unwrap_or(usize::MAX).min(limit)
        }
    };
    let mut out = Vec::with_capacity(capacity);
    with_context(|ctx| ctx.decompress(&mut out, data))?.ok()?;
    // A payload of one small block is bounded by a whole block (128 KiB):
    // what is kept of it should not be the bound.
    if out.capacity() - out.len() > out.len() / 4 {
        out.shrink_to_fit();
    }
    Some(out)
}

thread_local! {
    /// This thread's one-shot decompression context, kept between batches:
    /// setting one up (some 100 KiB of tables) costs more than
    /// decompressing a small batch's records does. A one-shot call decodes
    /// straight into its output, with no buffer of its own, and starts
    /// every frame afresh, so what an earlier call did (or failed at) does
    /// not carry over.
    static CONTEXT: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's one-shot context, set up on first use.
/// `None` if no context can be had (it could not be created, or the thread
/// is exiting).
fn with_context<T>(f: impl FnOnce(&mut DCtx<'static>) -> T) -> Option<T> {
    CONTEXT
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let ctx = match &mut *slot {
                Some(ctx) => ctx,
                empty => empty.insert(DCtx::try_create()?),
            };
            Some(f(ctx))
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` as a streaming compressor writes it: frames that do not state
    /// their content size.
    fn streamed(data: &[u8], level: i32) -> Vec<u8> {
        let out = zstd::stream::encode_all(data, level).expect("compresses");
        if !data.is_empty() {
            assert_eq!(stated_len(&out), None, "a streamed frame states no size");
        }
        out
    }

    fn payload(n: usize, seed: u32) -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(seed) % 251) as u8 ^ (i / 97) as u8)
            .collect()
    }

    #[test]
    fn frames_without_their_size_decode_whole_into_a_buffer_of_about_their_size() {
        let limit = 8 << 20;
        for (n, seed) in [(100_000, 7), (10, 3), (0, 1), (1 << 20, 13), (3000, 5)] {
            let data = payload(n, seed);
            let out = decompress_whole(&streamed(&data, 3), limit).expect("decodes");
            assert_eq!(out, data, "{n} bytes");
            assert!(
                out.capacity() <= n + n / 4 + 16,
                "{n} bytes in {}",
                out.capacity()
            );
        }
        // Two frames back to back, as a payload may hold.
        let (a, b) = (payload(5000, 11), payload(70_000, 17));
        let mut both = streamed(&a, 3);
        both.extend_from_slice(&streamed(&b, 1));
        let out = decompress_whole(&both, limit).expect("decodes");
        assert_eq!(out, [a, b].concat());
    }

    #[test]
    fn a_failed_payload_leaves_the_kept_context_clean() {
        let limit = 8 << 20;
        let data = payload(200_000, 29);
        let frame = streamed(&data, 3);
        // The first block's header (after the magic number, the frame
        // header descriptor and the window descriptor) given the reserved
        // block type.
        let mut reserved = frame.clone();
        reserved[6] |= 0b110;
        let mut magic = frame.clone();
        magic[0] ^= 0xff;
        let cut = &frame[..frame.len() - 7];
        for bad in [&reserved[..], &magic[..], cut, &frame[..4]] {
            assert_eq!(decompress_whole(bad, limit), None);
            // The next payload decodes as on a new context.
            assert_eq!(decompress_whole(&frame, limit), Some(data.clone()));
        }
        // No frame at all: left to the stream, which reports it.
        assert_eq!(decompress_whole(&[], limit), None);
        assert!(read_all(&[], limit).is_err());
    }

    #[test]
    fn nothing_past_the_limit_is_produced() {
        let data = payload(100_000, 31);
        let frame = streamed(&data, 3);
        assert_eq!(decompress_whole(&frame, data.len() - 1), None);
        assert_eq!(decompress_whole(&frame, 0), None);
        assert_eq!(decompress_whole(&frame, data.len()), Some(data));
        // A one-shot call needs no window buffer: a frame declaring a
        // window far over the cap still decodes if its content fits.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).expect("encoder");
        enc.window_log(27).expect("window");
        enc.include_contentsize(false).expect("no size");
        let big = payload(300_000, 37);
        std::io::Write::write_all(&mut enc, &big).expect("writes");
        let wide = enc.finish().expect("finishes");
        assert_eq!(decompress_whole(&wide, 1 << 20), Some(big));
    }

    /// What reading `data` through [`reader`] to its end gives: the bytes,
    /// or the error's text.
    fn read_all(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        reader(Bytes::copy_from_slice(data), limit)
            .and_then(|mut r| r.read_to_end(&mut out))
            .map(|_| out)
            .map_err(|e| e.to_string())
    }

    /// A damaged payload fails the same way whatever the thread decoded
    /// before. Found by `decode_batches_nocrc` while a streaming context
    /// was kept per thread: this records section (its frame states no
    /// size) failed with "Destination buffer is too small" on a new
    /// context and with "Data corruption detected" on one that had
    /// streamed a frame of a 4 KiB or larger window before, since how a
    /// damaged frame fails depends on the buffers earlier frames made a
    /// streaming context allocate.
    #[test]
    fn a_damaged_payload_fails_alike_whatever_came_before() {
        use base64::Engine as _;
        let damaged = base64::engine::general_purpose::STANDARD
            .decode(
                "KLUv/QABAyABAAAAAAAAKgao7QIAMq4PF5C1bQCLCAAAAAAABP9dzDEKgKVMAQBoBCAAAAAAAAAAAAao\
                 7QIAMq4PF5C1bQCLCAAAAAAABP9dzDEKgDAQRNHdsEiQFB4hFxA=",
            )
            .expect("base64");
        let limit = 64 << 20;
        let copy = damaged.clone();
        let fresh =
            std::thread::spawn(move || (decompress_whole(&copy, limit), read_all(&copy, limit)))
                .join()
                .expect("the thread ends");
        assert!(fresh.0.is_none() && fresh.1.is_err(), "{fresh:?}");
        // Frames of other windows first, whole and streamed.
        for window_log in [10, 12, 17, 24] {
            let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).expect("encoder");
            enc.window_log(window_log).expect("window");
            enc.include_contentsize(false).expect("no size");
            let other = payload(3 << 20, window_log);
            std::io::Write::write_all(&mut enc, &other).expect("writes");
            let frame = enc.finish().expect("finishes");
            assert_eq!(decompress_whole(&frame, limit).as_ref(), Some(&other));
            assert_eq!(read_all(&frame, limit).as_ref(), Ok(&other));
            let after = (decompress_whole(&damaged, limit), read_all(&damaged, limit));
            assert_eq!(after, fresh, "after a window of 2^{window_log}");
        }
    }
}
