//! LZ4 frame format. Record batches (magic 2) carry a standard LZ4 frame with a
//! correct header checksum (KIP-57 fixed the Java client's old one for magic 1+).

use std::io::{self, BufRead, Read, Write};

use bytes::{Buf, Bytes};
use lz4_flex::frame::{BlockSize, FrameDecoder, FrameEncoder, FrameInfo};

pub(super) fn reader(data: Bytes) -> Box<dyn Read + Send> {
    Box::new(FrameDecoder::new(data.reader()))
}

/// Decodes the whole frame into one buffer, block by block as the frame
/// decoder's own `read_to_end` does; `None` on an error or past `limit`.
pub(super) fn decompress_whole(data: &[u8], limit: usize, capacity: usize) -> Option<Vec<u8>> {
    let mut decoder = FrameDecoder::new(data);
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

pub(super) fn compress(data: &[u8]) -> io::Result<Vec<u8>> {
    // 64 KiB blocks, as the Java client's `KafkaLZ4BlockOutputStream` writes.
    // (lz4_flex would otherwise pick 4 MiB blocks for a large first write,
    // and every reader of the frame then allocates a 4 MiB block buffer.)
    let info = FrameInfo::new().block_size(BlockSize::Max64KB);
    let mut enc = FrameEncoder::with_frame_info(info, Vec::with_capacity(data.len() / 2 + 64));
    enc.write_all(data)?;
    enc.finish().map_err(io::Error::other)
}
