//! LZ4 frame format. Record batches (magic 2) carry a standard LZ4 frame with a
//! correct header checksum (KIP-57 fixed the Java client's old one for magic 1+).

use std::io::{self, Read, Write};

use bytes::{Buf, Bytes};
use lz4_flex::frame::{FrameDecoder, FrameEncoder};

pub(super) fn reader(data: Bytes) -> Box<dyn Read + Send> {
    Box::new(FrameDecoder::new(data.reader()))
}

pub(super) fn compress(data: &[u8]) -> io::Result<Vec<u8>> {
    let mut enc = FrameEncoder::new(Vec::with_capacity(data.len() / 2 + 64));
    enc.write_all(data)?;
    enc.finish().map_err(io::Error::other)
}
