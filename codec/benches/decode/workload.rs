//! The benchmark's workload: one buffer of record batches per case, with
//! seeded, deterministic WAL-entry payloads, checked against every contender
//! before any is timed.

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use walfetch_codec::{BatchBuilder, Compression, NewRecord, HEADER_LEN};

use crate::contenders::{decode_borrowed, decode_kafka, decode_ours, decompress_bare};

/// Uncompressed record bytes in every case's buffer.
const BUFFER_RECORD_BYTES: usize = 1 << 20;
pub(crate) const RECORD_SIZES: [usize; 3] = [100, 1 << 10, 16 << 10];
pub(crate) const BATCH_SIZES: [usize; 2] = [16 << 10, 1 << 20];

/// One benchmark case: a buffer of batches and what decoding it must yield.
pub(crate) struct Case {
    pub(crate) codec: Compression,
    /// zstd only: the records sections recompressed by a streaming
    /// compressor, whose frames do not state their content size (as the
    /// Java client, rskafka and kafka-protocol write them).
    pub(crate) streamed: bool,
    pub(crate) record_size: usize,
    pub(crate) batch_size: usize,
    /// The buffer every benchmark of the case reads.
    pub(crate) buf: Bytes,
    /// Each batch's records section (compressed) and its decompressed length.
    pub(crate) payloads: Vec<(Bytes, usize)>,
    pub(crate) records: usize,
    pub(crate) batches: usize,
    /// Size of the same batches uncompressed: the throughput byte count.
    pub(crate) logical_len: usize,
    /// Sum of key and value lengths, to check every decoder saw everything.
    pub(crate) key_value_bytes: usize,
}

impl Case {
    pub(crate) fn group_name(&self) -> String {
        format!(
            "decode-{}{}-r{}-b{}",
            self.codec.name(),
            if self.streamed { "-streamed" } else { "" },
            size_name(self.record_size),
            size_name(self.batch_size)
        )
    }

    /// The codec, as the tables name it.
    pub(crate) fn codec_label(&self) -> String {
        match self.streamed {
            true => format!("{} (streamed)", self.codec.name()),
            false => self.codec.name().to_owned(),
        }
    }
}

/// `batch` (a zstd-compressed record batch) with its records section
/// recompressed by zstd's streaming encoder at level 3, which does not
/// state the content size in the frame header; length and CRC updated.
fn restream_zstd(batch: &[u8], decompressed_len: usize) -> Vec<u8> {
    let records = zstd::bulk::decompress(&batch[HEADER_LEN..], decompressed_len)
        .expect("the batch decompresses");
    let mut out = batch[..HEADER_LEN].to_vec();
    out.extend(zstd::stream::encode_all(&records[..], 3).expect("recompresses"));
    // batchLength counts from the partition leader epoch (byte 12); the
    // CRC (bytes 17..21) covers everything from the attributes (byte 21).
    let batch_length = i32::try_from(out.len() - 12).expect("a batch under 2 GiB");
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn size_name(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}m", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}k", n >> 10),
        n => n.to_string(),
    }
}

const TABLES: [&str; 6] = [
    "orders",
    "customers",
    "shipments",
    "invoices",
    "payments",
    "stock",
];
const OPS: [&str; 3] = ["INSERT", "UPDATE", "DELETE"];
const WORDS: [&str; 16] = [
    "pending",
    "shipped",
    "delivered",
    "cancelled",
    "warehouse",
    "priority",
    "standard",
    "express",
    "refund",
    "customer",
    "address",
    "quantity",
    "discount",
    "currency",
    "EUR",
    "notes",
];
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// One WAL entry of exactly `size` bytes (key plus value), as key and value.
fn wal_entry(rng: &mut StdRng, lsn: u64, size: usize) -> (Bytes, Bytes) {
    let table = TABLES[rng.random_range(0..TABLES.len())];
    let row = rng.random_range(0..1_000_000);
    let key = format!("{table}:{row:08}");
    let value_len = size.saturating_sub(key.len()).max(2);
    let mut value = format!(
        r#"{{"lsn":{lsn},"ts":{},"op":"{}","tx":{},"row":{{"id":{row},"d":""#,
        1_700_000_000_000u64 + lsn * 3 + rng.random_range(0..3),
        OPS[rng.random_range(0..OPS.len())],
        lsn / 7,
    )
    .into_bytes();
    // The rest: runs of vocabulary words (compressible) and of random base64
    // characters (6 bits of entropy a byte), about 3:2.
    while value.len() + 3 < value_len {
        if rng.random_ratio(3, 5) {
            value.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())].as_bytes());
            value.push(b' ');
        } else {
            for _ in 0..rng.random_range(8..32) {
                value.push(BASE64[rng.random_range(0..64)]);
            }
        }
    }
    value.truncate(value_len - 3);
    value.extend_from_slice(br#""}}"#);
    value.truncate(value_len);
    (key.into(), value.into())
}

/// Builds a case; `streamed` (zstd only, see [`Case::streamed`]).
pub(crate) fn build_case(
    codec: Compression,
    streamed: bool,
    record_size: usize,
    batch_size: usize,
) -> Case {
    let mut rng =
        StdRng::seed_from_u64(0x5eed ^ ((record_size as u64) << 8) ^ ((batch_size as u64) << 32));
    let batches = (BUFFER_RECORD_BYTES / batch_size).max(1);
    let per_batch = (batch_size / record_size).max(1);
    let mut buf = Vec::new();
    let mut payloads = Vec::new();
    let (mut records, mut logical_len, mut key_value_bytes) = (0, 0, 0);
    let mut lsn = 0u64;
    for _ in 0..batches {
        let new_records: Vec<NewRecord> = (0..per_batch)
            .map(|i| {
                let (key, value) = wal_entry(&mut rng, lsn, record_size);
                key_value_bytes += key.len() + value.len();
                lsn += 1;
                NewRecord {
                    offset_delta: i as i32,
                    timestamp: 1_700_000_000_000 + lsn as i64 * 3,
                    key: Some(key),
                    value: Some(value),
                    headers: Vec::new(),
                }
            })
            .collect();
        let encoded = BatchBuilder::new(records as i64)
            .compression(codec)
            .encode(&new_records)
            .expect("benchmark records encode");
        let decompressed_len = encoded.record_ranges.last().map_or(0, |r| match codec {
            Compression::None => r.end - HEADER_LEN,
            _ => r.end,
        });
        let bytes = match streamed {
            true => Bytes::from(restream_zstd(&encoded.bytes, decompressed_len)),
            false => encoded.bytes,
        };
        records += per_batch;
        logical_len += HEADER_LEN + decompressed_len;
        payloads.push((bytes.slice(HEADER_LEN..), decompressed_len));
        buf.extend_from_slice(&bytes);
    }
    let case = Case {
        codec,
        streamed,
        record_size,
        batch_size,
        buf: buf.into(),
        payloads,
        records,
        batches,
        logical_len,
        key_value_bytes,
    };
    // Every contender must see the same records before any is timed.
    assert_eq!(
        decode_ours(&case.buf),
        case.key_value_bytes,
        "{}: walfetch",
        case.group_name()
    );
    assert_eq!(
        decode_borrowed(&case.buf),
        case.key_value_bytes,
        "{}: walfetch (borrowed)",
        case.group_name()
    );
    assert_eq!(
        decode_kafka(&case.buf),
        case.key_value_bytes,
        "{}: kafka-protocol",
        case.group_name()
    );
    if codec != Compression::None {
        let expected: usize = case.payloads.iter().map(|(_, n)| n).sum();
        assert_eq!(
            decompress_bare(codec, &case.payloads),
            expected,
            "{}: decompress",
            case.group_name()
        );
    }
    case
}
