//! Zstandard (KIP-110).

use std::cell::RefCell;
use std::io::{self, Read};

use bytes::{Buf, Bytes};
use zstd::stream::raw::Operation;
use zstd::stream::zio;
use zstd::zstd_safe::{self, DCtx, DParameter, InBuffer, OutBuffer, ResetDirective, WriteBuf};

/// A streaming decoder whose window may not exceed the decompressed-size cap
/// (the window is the largest buffer a zstd frame can make a decoder
/// allocate), or 8 MiB for small caps so that frames from ordinary
/// compressors still decode far enough to report the cap itself. It runs
/// on this thread's kept streaming context (see [`CONTEXT`]), which
/// goes back when the reader is dropped, read to the end or not (a cut
/// batch is read only as far as its records go).
pub(super) fn reader(data: Bytes, limit: usize) -> io::Result<Box<dyn Read + Send>> {
    let ctx = context(limit)
        .ok_or_else(|| io::Error::other("no zstd decompression context could be set up"))?;
    Ok(Box::new(zio::Reader::new(
        data.reader(),
        KeptContext(Some(ctx)),
    )))
}

/// A streaming decompression context lent to a reader: zstd's streaming
/// call over it, with the frame-level behaviour of the zstd crate's own
/// decoder (a frame left unfinished at the end of the input is an error);
/// given back to the thread when dropped.
struct KeptContext(Option<DCtx<'static>>);

impl KeptContext {
    fn ctx(&mut self) -> io::Result<&mut DCtx<'static>> {
        self.0
            .as_mut()
            .ok_or_else(|| io::Error::other("the zstd context was given back"))
    }
}

/// A zstd error code as an I/O error, with zstd's name for it.
fn zstd_error(code: usize) -> io::Error {
    io::Error::other(zstd_safe::get_error_name(code))
}

impl Operation for KeptContext {
    fn run<C: WriteBuf + ?Sized>(
        &mut self,
        input: &mut InBuffer<'_>,
        output: &mut OutBuffer<'_, C>,
    ) -> io::Result<usize> {
        self.ctx()?
            .decompress_stream(output, input)
            .map_err(zstd_error)
    }

    fn flush<C: WriteBuf + ?Sized>(&mut self, output: &mut OutBuffer<'_, C>) -> io::Result<usize> {
        // Nothing more to give it: what it still holds comes out. Whether
        // more is held is known only when the output did not fill.
        self.run(&mut InBuffer::around(&[]), output)?;
        Ok(usize::from(output.pos() == output.capacity()))
    }

    fn reinit(&mut self) -> io::Result<()> {
        self.ctx()?
            .reset(ResetDirective::SessionOnly)
            .map(drop)
            .map_err(zstd_error)
    }

    fn finish<C: WriteBuf + ?Sized>(
        &mut self,
        _output: &mut OutBuffer<'_, C>,
        finished_frame: bool,
    ) -> io::Result<usize> {
        match finished_frame {
            true => Ok(0),
            false => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "incomplete zstd frame",
            )),
        }
    }
}

impl Drop for KeptContext {
    fn drop(&mut self) {
        if let Some(ctx) = self.0.take() {
            give_back(ctx);
        }
    }
}

/// The largest window a decoder capped at `limit` bytes accepts:
/// ceil(log2(limit)), the smallest window that can hold `limit` bytes,
/// at least 8 MiB (see [`reader`]).
fn window_log_max(limit: usize) -> u32 {
    let window_log = usize::BITS - limit.saturating_sub(1).leading_zeros();
    window_log.clamp(23, 31)
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

/// Decompresses all of a payload at once, with this thread's kept context
/// (see [`CONTEXT`]). A payload whose first frame states a content size of
/// at most `limit` goes in one shot into a buffer of exactly that size. One
/// whose first frame does not state it (streaming compressors leave it out:
/// the Java client's, rskafka's, which GreptimeDB writes with, and
/// kafka-protocol's) is streamed into a buffer starting at `capacity`
/// bytes. `None` when the stated size is over `limit`, when the output
/// would pass `limit`, or when the payload does not decompress cleanly
/// (damage, a frame cut short, more frames than the one-shot call takes):
/// the caller then streams it, which reports what was wrong.
pub(super) fn decompress_whole(data: &[u8], limit: usize, capacity: usize) -> Option<Vec<u8>> {
    let Some(size) = stated_len(data) else {
        return decompress_streamed(data, limit, capacity);
    };
    if size > limit {
        return None;
    }
    let mut out = Vec::with_capacity(size);
    with_context(limit, |ctx| ctx.decompress(&mut out, data))?.ok()?;
    Some(out)
}

/// Streams every frame of `data` into one buffer with this thread's kept
/// streaming context; `None` on an error, a frame cut short, or past
/// `limit`.
fn decompress_streamed(data: &[u8], limit: usize, capacity: usize) -> Option<Vec<u8>> {
    with_context(limit, |ctx| {
        let mut out = Vec::with_capacity(capacity.min(limit));
        let mut input = InBuffer::around(data);
        loop {
            if out.len() == out.capacity() {
                let room = limit.saturating_sub(out.len());
                if room == 0 {
                    // Full at the cap: only an input that ends here, its
                    // frame done, fits; anything more is past `limit`.
                    return None;
                }
                out.reserve_exact(out.capacity().clamp(1, room));
            }
            let (read, written) = (input.pos(), out.len());
            let hint = {
                let mut output = OutBuffer::around_pos(&mut out, written);
                ctx.decompress_stream(&mut output, &mut input).ok()?
            };
            // 0: a frame ended. With no input left, that is the payload's
            // end; with more, the next frame starts on the next call.
            if hint == 0 && input.pos() == data.len() {
                return Some(out);
            }
            let progressed = input.pos() > read || out.len() > written;
            // All input read and room left in the output, but the frame
            // is not done: it was cut short.
            let starved = input.pos() == data.len() && out.len() < out.capacity();
            if !progressed || starved {
                return None;
            }
        }
    })
    .flatten()
}

/// A kept context holding more than this (its window buffer grew for a
/// streamed frame with a large window) is freed rather than kept: what a
/// thread keeps stays small. Streaming compressors at their default levels
/// write windows of 2 MiB or less, which fit.
const KEEP_CONTEXT_BYTES: usize = 4 << 20;

thread_local! {
    /// This thread's decompression context, kept between payloads: setting
    /// one up allocates some 100 KiB of tables and, for each frame it
    /// streams, a buffer of the frame's window (2 MiB from a streaming
    /// compressor at level 3), which costs more than decompressing a small
    /// batch's records does.
    static CONTEXT: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's context (see [`context`]), then gives it
/// back. `None` if no context can be had.
fn with_context<T>(limit: usize, f: impl FnOnce(&mut DCtx<'static>) -> T) -> Option<T> {
    let mut ctx = context(limit)?;
    let out = f(&mut ctx);
    give_back(ctx);
    Some(out)
}

/// This thread's context, taken (set up if it has none), ready for a new
/// frame and accepting windows up to what `limit` allows. `None` if no
/// context can be had.
fn context(limit: usize) -> Option<DCtx<'static>> {
    let kept = CONTEXT.try_with(RefCell::take).ok().flatten();
    let mut ctx = match kept {
        Some(ctx) => ctx,
        None => DCtx::try_create()?,
    };
    ctx.set_parameter(DParameter::WindowLogMax(window_log_max(limit)))
        .ok()?;
    Some(ctx)
}

/// Keeps `ctx` as this thread's context, reset (a new frame with no
/// dictionary, as a new context would start), unless it grew past
/// [`KEEP_CONTEXT_BYTES`] or cannot be reset, or the thread already keeps
/// one (a reader still open when another payload was decoded).
fn give_back(mut ctx: DCtx<'static>) {
    if ctx.reset(ResetDirective::SessionOnly).is_err() || ctx.sizeof() > KEEP_CONTEXT_BYTES {
        return;
    }
    let _ = CONTEXT.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            slot.get_or_insert(ctx);
        }
    });
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

    /// What this thread keeps, and how large it is.
    fn kept_size() -> Option<usize> {
        CONTEXT.with(|cell| cell.borrow().as_ref().map(DCtx::sizeof))
    }

    #[test]
    fn frames_without_their_size_decode_whole_with_one_kept_context() {
        let limit = 8 << 20;
        for (n, seed) in [(100_000, 7), (10, 3), (0, 1), (1 << 20, 13), (3000, 5)] {
            let data = payload(n, seed);
            let out = decompress_whole(&streamed(&data, 3), limit, 16).expect("decodes");
            assert_eq!(out, data, "{n} bytes");
            assert!(kept_size().is_some_and(|k| k <= KEEP_CONTEXT_BYTES));
        }
        // Two frames back to back, as a payload may hold.
        let (a, b) = (payload(5000, 11), payload(70_000, 17));
        let mut both = streamed(&a, 3);
        both.extend_from_slice(&streamed(&b, 1));
        let out = decompress_whole(&both, limit, 0).expect("decodes");
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
        for bad in [&reserved[..], &magic[..], cut, &frame[..4], &[][..]] {
            assert_eq!(decompress_whole(bad, limit, 0), None);
            // The next payload decodes as on a new context.
            let out = decompress_whole(&frame, limit, 0).expect("decodes");
            assert_eq!(out, data);
        }
    }

    #[test]
    fn nothing_past_the_limit_is_produced() {
        let data = payload(100_000, 31);
        let frame = streamed(&data, 3);
        assert_eq!(decompress_whole(&frame, data.len() - 1, 1 << 20), None);
        assert_eq!(decompress_whole(&frame, 0, 1 << 20), None);
        let exact = decompress_whole(&frame, data.len(), 4096);
        // At exactly the cap the stream may not have shown the frame's end
        // yet; then the caller streams it. Either way, never past it.
        assert!(exact.is_none_or(|out| out == data));
        // A frame whose window is over what the cap allows is refused
        // before its window buffer is allocated.
        let mut params = zstd::stream::Encoder::new(Vec::new(), 3).expect("encoder");
        params.window_log(27).expect("window");
        params.include_contentsize(false).expect("no size");
        let big = payload(300_000, 37);
        std::io::Write::write_all(&mut params, &big).expect("writes");
        let wide = params.finish().expect("finishes");
        assert_eq!(
            decompress_whole(&wide, 1 << 20, 0),
            None,
            "window 128 MiB, cap 1 MiB"
        );
    }

    /// Reads `data` through [`reader`] in small steps: what it produced,
    /// and the error that ended it, if any.
    fn read_stream(data: &[u8], limit: usize, at_most: usize) -> (Vec<u8>, Option<io::Error>) {
        let mut stream = reader(Bytes::copy_from_slice(data), limit).expect("a reader");
        let mut out = Vec::new();
        let mut step = [0u8; 1000];
        while out.len() < at_most {
            match stream.read(&mut step) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&step[..n]),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    #[test]
    fn a_reader_gives_its_context_back_however_far_it_read() {
        let limit = 8 << 20;
        let data = payload(300_000, 47);
        let frame = streamed(&data, 3);
        // Stopped early, as a cut batch's records are read only so far.
        let (head, err) = read_stream(&frame, limit, 5000);
        assert!(err.is_none() && data.starts_with(&head) && head.len() >= 5000);
        assert!(kept_size().is_some(), "given back when dropped");
        // A frame cut short: what is there, then an error.
        let (part, err) = read_stream(&frame[..frame.len() / 2], limit, usize::MAX);
        assert!(err.is_some(), "a cut frame is an error at its end");
        assert!(data.starts_with(&part), "only whole blocks, in order");
        // The kept context starts each payload afresh: whole, by either
        // path, and a frame that states its size too.
        assert_eq!(read_stream(&frame, limit, usize::MAX).0, data);
        assert_eq!(decompress_whole(&frame, limit, 0), Some(data.clone()));
        let sized = zstd::bulk::compress(&data, 3).expect("compresses");
        assert_eq!(read_stream(&sized, limit, usize::MAX).0, data);
        // Two readers open at once: each has its own context.
        let mut first = reader(Bytes::from(frame.clone()), limit).expect("a reader");
        let second = read_stream(&frame, limit, usize::MAX).0;
        let mut rest = Vec::new();
        first.read_to_end(&mut rest).expect("reads");
        assert_eq!((rest, second), (data.clone(), data));
    }

    #[test]
    fn a_context_grown_for_a_large_window_is_not_kept() {
        // A frame of 16 MiB window (and more content than that) makes the
        // context allocate its window; it is freed afterwards.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).expect("encoder");
        enc.window_log(24).expect("window");
        enc.include_contentsize(false).expect("no size");
        let data = payload(20 << 20, 41);
        std::io::Write::write_all(&mut enc, &data).expect("writes");
        let frame = enc.finish().expect("finishes");
        let out = decompress_whole(&frame, 64 << 20, 0).expect("decodes");
        assert_eq!(out.len(), data.len());
        assert_eq!(kept_size(), None, "the grown context was freed");
        let (streamed_out, err) = read_stream(&frame, 64 << 20, usize::MAX);
        assert!(err.is_none() && streamed_out.len() == data.len());
        assert_eq!(kept_size(), None, "nor kept after a reader");
        let small = payload(1000, 43);
        assert_eq!(
            decompress_whole(&streamed(&small, 3), 64 << 20, 0),
            Some(small)
        );
        assert!(kept_size().is_some());
    }
}
