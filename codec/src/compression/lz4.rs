//! LZ4 frame format. Record batches (magic 2) carry a standard LZ4 frame with a
//! correct header checksum (KIP-57 fixed the Java client's old one for magic 1+).

use std::cell::Cell;
use std::io::{self, BufRead, Read, Write};

use bytes::{Buf, Bytes};
use lz4_flex::frame::{BlockSize, FrameDecoder, FrameEncoder, FrameInfo};

pub(super) fn reader(data: Bytes) -> Box<dyn Read + Send> {
    Box::new(FrameDecoder::new(data.reader()))
}

/// Decodes the whole payload into one buffer, block by block as the frame
/// decoder's own `read_to_end` does; `None` on an error or past `limit`.
///
/// The decoder is this thread's kept one where there is one (see
/// [`DECODER`]), so its block buffers are not allocated again for every
/// batch.
pub(super) fn decompress_whole(data: &Bytes, limit: usize, capacity: usize) -> Option<Vec<u8>> {
    let keep = has_small_blocks(data);
    let mut decoder = kept_decoder(data.clone());
    let out = decode_all(&mut decoder, limit, capacity)?;
    if keep {
        // The frames ended cleanly: the decoder waits for a next frame's
        // header, with no state left from this payload.
        *decoder.get_mut() = Bytes::new().reader();
        let _ = DECODER.try_with(|cell| cell.set(Some(decoder)));
    }
    Some(out)
}

/// A frame decoder reading from a batch's compressed bytes.
type Decoder = FrameDecoder<bytes::buf::Reader<Bytes>>;

thread_local! {
    /// This thread's idle frame decoder, kept after it decoded a payload to
    /// its clean end. Setting one up allocates a buffer for compressed and
    /// one for decompressed blocks, which for a small batch costs a good
    /// share of decompressing it. Only a decoder whose payload began with a
    /// frame of 64 KiB blocks (what Kafka clients write) is kept, so what a
    /// thread holds on to is normally some 200 KiB.
    static DECODER: Cell<Option<Decoder>> = const { Cell::new(None) };
}

/// This thread's kept decoder, now reading `data`, or a new one.
fn kept_decoder(data: Bytes) -> Decoder {
    match DECODER.try_with(Cell::take).ok().flatten() {
        Some(mut decoder) => {
            *decoder.get_mut() = data.reader();
            decoder
        }
        None => FrameDecoder::new(data.reader()),
    }
}

/// Whether `data` starts with an LZ4 frame whose blocks are at most 64 KiB:
/// the standard magic number, then a `BD` byte stating block size id 4.
fn has_small_blocks(data: &[u8]) -> bool {
    const MAGIC: [u8; 4] = 0x184D_2204u32.to_le_bytes();
    const BLOCK_64_KIB: u8 = 4;
    data.starts_with(&MAGIC)
        && data
            .get(5)
            .is_some_and(|bd| (bd >> 4) & 0x07 == BLOCK_64_KIB)
}

/// Reads everything `decoder` produces; `None` on an error or past `limit`.
fn decode_all(decoder: &mut Decoder, limit: usize, capacity: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(capacity.min(limit));
    loop {
        let block = decoder.fill_buf().ok()?;
        if block.is_empty() {
            return Some(out);
        }
        if block.len() > limit - out.len() {
            return None;
        }
        out.extend_from_slice(block);
        let n = block.len();
        decoder.consume(n);
    }
}

/// Appends `data` to `out` as one LZ4 frame of 64 KiB blocks, as the Java
/// client's `KafkaLZ4BlockOutputStream` writes them. (lz4_flex would
/// otherwise pick 4 MiB blocks for a large first write, and every reader of
/// the frame then allocates a 4 MiB block buffer.)
///
/// The encoder is this thread's kept one where there is one (see
/// [`ENCODER`]): setting one up allocates its block buffers and match
/// table, which for a small batch costs more than compressing it.
pub(super) fn compress_into(data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    // A used encoder given no bytes would end a frame it never began.
    let kept = (!data.is_empty())
        .then(|| ENCODER.try_with(Cell::take).ok().flatten())
        .flatten();
    let mut enc = kept.unwrap_or_else(|| {
        FrameEncoder::with_frame_info(FrameInfo::new().block_size(BlockSize::Max64KB), Vec::new())
    });
    *enc.get_mut() = std::mem::take(out);
    let written = enc
        .write_all(data)
        .and_then(|()| enc.try_finish().map_err(io::Error::other));
    *out = std::mem::take(enc.get_mut());
    if written.is_ok() {
        // A finished frame leaves no state behind: the next frame starts
        // afresh (lz4_flex resets the encoder when it begins one).
        let _ = ENCODER.try_with(|cell| cell.set(Some(enc)));
    }
    written
}

thread_local! {
    /// This thread's idle frame encoder, kept after it finished a frame;
    /// it holds its 64 KiB block buffers and 16 KiB match table (some
    /// 150 KiB).
    static ENCODER: Cell<Option<FrameEncoder<Vec<u8>>>> = const { Cell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` compressed on a new thread, by an encoder never used before.
    fn by_a_new_encoder(data: &[u8]) -> Vec<u8> {
        let data = data.to_vec();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            compress_into(&data, &mut out).map(|()| out)
        })
        .join()
        .expect("the thread ends")
        .expect("compresses")
    }

    #[test]
    fn a_kept_encoder_writes_each_frame_as_a_new_one_would() {
        // Four blocks, then smaller and empty payloads on the same thread.
        let large: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let small = b"a small batch after a large one; ".repeat(3);
        let mut out = b"header".to_vec();
        compress_into(&large, &mut out).expect("compresses");
        assert_eq!(&out[..6], b"header");
        assert_eq!(out[6..], by_a_new_encoder(&large));
        for data in [&small[..], &[][..], &large[..], &small[..]] {
            let mut out = Vec::new();
            compress_into(data, &mut out).expect("compresses");
            assert_eq!(out, by_a_new_encoder(data));
            let mut back = Vec::new();
            FrameDecoder::new(&out[..])
                .read_to_end(&mut back)
                .expect("decodes");
            assert_eq!(back, data);
        }
    }
}
