//! The contenders each case times, all on the same buffer: walfetch's two
//! walks, kafka-protocol's decoder, bare CRC32C and the bare decompressors.

use std::hint::black_box;
use std::io::Read;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use walfetch_codec::{Batches, Compression, DecodeOptions, Records};

use crate::workload::Case;

/// Criterion's ids of the contenders. `walfetch` is the owned walk, the one
/// the report's targets judge; `walfetch-borrowed` the borrowed walk.
pub(crate) const OURS: &str = "walfetch";
pub(crate) const BORROWED: &str = "walfetch-borrowed";
pub(crate) const KAFKA: &str = "kafka-protocol";
pub(crate) const CRC: &str = "crc32c";
pub(crate) const DECOMPRESS: &str = "decompress";

/// One contender: its criterion id and one run over the case's buffer.
pub(crate) type Contender<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);

/// Every contender of `case` (the bare decompressor only for a compressed
/// case), each reading the same buffer.
pub(crate) fn contenders(case: &Case) -> Vec<Contender<'_>> {
    let mut all: Vec<Contender<'_>> = vec![
        (OURS, Box::new(|| decode_ours(black_box(&case.buf)))),
        (BORROWED, Box::new(|| decode_borrowed(black_box(&case.buf)))),
        (KAFKA, Box::new(|| decode_kafka(black_box(&case.buf)))),
        (
            CRC,
            Box::new(|| crc32c::crc32c(black_box(&case.buf)) as usize),
        ),
    ];
    if case.codec != Compression::None {
        let codec = case.codec;
        all.push((
            DECOMPRESS,
            Box::new(move || decompress_bare(codec, black_box(&case.payloads))),
        ));
    }
    all
}

/// Touches a record's key and value; returns the sum of their lengths, so
/// every contender can be checked to have seen every byte.
fn touch(key: Option<&[u8]>, value: Option<&[u8]>) -> usize {
    let (key, value) = (black_box(key), black_box(value));
    key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len)
}

/// Opens every batch of `buf` (CRC checked) and its records, and sums what
/// `walk` returns for each batch's records.
fn walk_batches(buf: &Bytes, mut walk: impl FnMut(Records) -> usize) -> usize {
    let mut sum = 0;
    for batch in Batches::new(buf.clone(), DecodeOptions::default()) {
        let batch = batch.expect("walfetch decodes the batch");
        sum += walk(batch.records().expect("walfetch opens the records"));
    }
    sum
}

/// Our decoder: every batch (CRC checked), every record, key and value
/// touched, each record an owned `Record` (`Records` as an `Iterator`).
pub(crate) fn decode_ours(buf: &Bytes) -> usize {
    walk_batches(buf, |records| {
        let mut sum = 0;
        for record in records {
            let record = record.expect("walfetch decodes the record");
            sum += touch(record.key(), record.value());
        }
        sum
    })
}

/// Our decoder as [`decode_ours`], but lending each record with
/// `Records::next_ref` (no reference count per record).
pub(crate) fn decode_borrowed(buf: &Bytes) -> usize {
    walk_batches(buf, |mut records| {
        let mut sum = 0;
        while let Some(record) = records.next_ref() {
            let record = record.expect("walfetch decodes the record");
            sum += touch(record.key(), record.value());
        }
        sum
    })
}

/// kafka-protocol's decoder (it checks the CRC too) on the same buffer.
pub(crate) fn decode_kafka(buf: &Bytes) -> usize {
    let mut input = buf.clone();
    let sets =
        RecordBatchDecoder::decode_all(&mut input).expect("kafka-protocol decodes the buffer");
    let mut sum = 0;
    for record in sets.iter().flat_map(|set| &set.records) {
        sum += touch(record.key.as_deref(), record.value.as_deref());
    }
    sum
}

/// The bare decompressor on each batch's records section, into a `Vec` sized
/// for the known output. Returns the bytes produced.
///
/// The zstd context and the lz4 frame decoder are set up once and kept
/// across the buffer's batches, as walfetch keeps one of each per thread:
/// setting one up costs about as much as decompressing a 16 KiB batch, and
/// a limit that paid that per batch would be no limit.
pub(crate) fn decompress_bare(codec: Compression, payloads: &[(Bytes, usize)]) -> usize {
    let mut zstd = None;
    let mut lz4 = None;
    let mut total = 0;
    for (payload, len) in payloads {
        let mut out = Vec::with_capacity(*len);
        match codec {
            Compression::None => out.extend_from_slice(payload),
            Compression::Gzip => {
                flate2::read::MultiGzDecoder::new(&payload[..])
                    .read_to_end(&mut out)
                    .expect("gzip decompresses");
            }
            Compression::Snappy => out = xerial_snappy(payload, *len),
            Compression::Lz4 => {
                let decoder =
                    lz4.get_or_insert_with(|| lz4_flex::frame::FrameDecoder::new(&payload[..]));
                *decoder.get_mut() = &payload[..];
                decoder.read_to_end(&mut out).expect("lz4 decompresses");
            }
            Compression::Zstd => {
                let decompressor = zstd.get_or_insert_with(|| {
                    zstd::bulk::Decompressor::new().expect("a zstd decompression context")
                });
                decompressor
                    .decompress_to_buffer(&payload[..], &mut out)
                    .expect("zstd decompresses");
            }
        }
        total += black_box(out).len();
    }
    total
}

/// Decompresses an xerial-framed snappy payload (16-byte header, then blocks
/// of a big-endian `u32` length and a raw snappy block) into one `Vec`.
fn xerial_snappy(payload: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let mut decoder = snap::raw::Decoder::new();
    let (mut pos, mut filled) = (16, 0);
    while pos < payload.len() {
        let block_len =
            u32::from_be_bytes(payload[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let block = &payload[pos + 4..pos + 4 + block_len];
        filled += decoder
            .decompress(block, &mut out[filled..])
            .expect("snappy decompresses");
        pos += 4 + block_len;
    }
    out.truncate(filled);
    out
}
