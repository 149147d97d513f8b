//! Snappy, in both shapes Kafka clients write: one raw snappy block
//! (librdkafka), or the xerial `SnappyOutputStream` framing (the Java client):
//! a 16-byte header (`\x82SNAPPY\0`, version, compatible version) followed by
//! blocks, each a big-endian `u32` length and one raw snappy block. A reader
//! tells them apart by the magic, as the Java client's `SnappyInputStream` does.

use std::io::{self, Read};

use bytes::Bytes;
use snap::raw::{decompress_len, max_compress_len, Decoder, Encoder};

use super::Decompressed;

/// The xerial stream header: magic, version 1, compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// The xerial block size of the Java client's `SnappyOutputStream`.
const XERIAL_BLOCK: usize = 32 * 1024;

/// How snappy-compressed records are framed by the encoder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum SnappyFraming {
    /// xerial framing, as the Java client writes; every Kafka client reads it.
    #[default]
    Xerial,
    /// One raw snappy block, as librdkafka writes.
    Raw,
}

pub(super) fn decompress(data: Bytes, limit: usize) -> io::Result<Decompressed> {
    if data.starts_with(&XERIAL_HEADER[..8]) {
        if data.len() < XERIAL_HEADER.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "truncated xerial snappy header",
            ));
        }
        return Ok(Decompressed::Stream(Box::new(XerialReader {
            data,
            pos: XERIAL_HEADER.len(),
            block: Vec::new(),
            block_pos: 0,
            limit,
        })));
    }
    Ok(Decompressed::Whole(Bytes::from(raw_block(&data, limit)?)))
}

/// For an xerial payload, the sum of its blocks' stated lengths (raw snappy
/// is decompressed whole, so it needs no hint).
pub(super) fn stated_len(data: &[u8]) -> Option<usize> {
    if !data.starts_with(&XERIAL_HEADER[..8]) {
        return None;
    }
    let mut rest = data.get(XERIAL_HEADER.len()..)?;
    let mut total = 0usize;
    while let Some(len_bytes) = rest.get(..4) {
        let len = u32::from_be_bytes(len_bytes.try_into().ok()?) as usize;
        let block = rest.get(4..4 + len)?;
        total = total.saturating_add(decompress_len(block).ok()?);
        rest = &rest[4 + len..];
    }
    Some(total)
}

/// Decompresses one raw block, refusing before allocating when its stated
/// length is over `limit`.
fn raw_block(block: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let len = decompress_len(block).map_err(io::Error::other)?;
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("snappy block states {len} decompressed bytes, over the {limit}-byte cap"),
        ));
    }
    Decoder::new()
        .decompress_vec(block)
        .map_err(io::Error::other)
}

/// Streams an xerial-framed snappy payload one block at a time.
struct XerialReader {
    data: Bytes,
    pos: usize,
    block: Vec<u8>,
    block_pos: usize,
    /// The payload cap: no single block may state more than this.
    limit: usize,
}

impl Read for XerialReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.block_pos == self.block.len() {
            if self.pos == self.data.len() {
                return Ok(0);
            }
            let rest = &self.data[self.pos..];
            let Some(len_bytes) = rest.get(..4) else {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "truncated xerial block length",
                ));
            };
            let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                as usize;
            let Some(block) = rest.get(4..4 + len) else {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("xerial block of {len} bytes runs past the payload's end"),
                ));
            };
            // The caller checks the running total against the cap; checking
            // each block's stated size too keeps one block from allocating
            // past it.
            let stated = decompress_len(block).map_err(io::Error::other)?;
            if stated > 0 && stated <= self.limit && stated <= out.len() {
                // The block fits the caller's buffer (as when the whole
                // payload is read at once): decompress into it directly
                // instead of through `self.block`.
                let n = Decoder::new()
                    .decompress(block, &mut out[..stated])
                    .map_err(io::Error::other)?;
                self.pos += 4 + len;
                return Ok(n);
            }
            self.block = raw_block(block, self.limit)?;
            self.block_pos = 0;
            self.pos += 4 + len;
        }
        let n = out.len().min(self.block.len() - self.block_pos);
        out[..n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
        self.block_pos += n;
        Ok(n)
    }
}

pub(super) fn compress(data: &[u8], framing: SnappyFraming) -> io::Result<Vec<u8>> {
    let mut enc = Encoder::new();
    match framing {
        SnappyFraming::Raw => enc.compress_vec(data).map_err(io::Error::other),
        SnappyFraming::Xerial => {
            let mut out = Vec::with_capacity(XERIAL_HEADER.len() + max_compress_len(data.len()));
            out.extend_from_slice(XERIAL_HEADER);
            for chunk in data.chunks(XERIAL_BLOCK) {
                let start = out.len();
                out.extend_from_slice(&[0; 4]);
                out.resize(start + 4 + max_compress_len(chunk.len()), 0);
                let n = enc
                    .compress(chunk, &mut out[start + 4..])
                    .map_err(io::Error::other)?;
                out.truncate(start + 4 + n);
                out[start..start + 4].copy_from_slice(&(n as u32).to_be_bytes());
            }
            Ok(out)
        }
    }
}
