//! gzip (RFC 1952), as written by the Java client's `GZIPOutputStream`.

use std::io::{self, Read, Write};

use bytes::{Buf, Bytes};
use flate2::{read::MultiGzDecoder, write::GzEncoder};

pub(super) fn reader(data: Bytes) -> Box<dyn Read + Send> {
    Box::new(MultiGzDecoder::new(data.reader()))
}

pub(super) fn compress(data: &[u8]) -> io::Result<Vec<u8>> {
    let mut enc = GzEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        flate2::Compression::fast(),
    );
    enc.write_all(data)?;
    enc.finish()
}

/// The length the last member's trailer states (`ISIZE`: the size modulo
/// 2^32), which is the whole size for the usual single member.
pub(super) fn stated_len(data: &[u8]) -> Option<usize> {
    let trailer = data.len().checked_sub(4).filter(|_| data.len() >= 18)?;
    let stated = u32::from_le_bytes(data[trailer..].try_into().ok()?);
    usize::try_from(stated).ok()
}
