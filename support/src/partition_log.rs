//! A partition's log read back with plain fetches, batch by batch, every
//! record decoded: what the tests check a writer's output against and what
//! the benches lay out to compute a replay's floor.

use std::time::Duration;

use bytes::Bytes;
use walfetch::cluster::{Cluster, FetchParams};
use walfetch::codec::{BatchHeader, Batches, Compression, DecodeOptions, RecordCheck};
use walfetch::index::RegionId;

/// One record as read back.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Its offset.
    pub offset: i64,
    /// Its timestamp (milliseconds).
    pub timestamp: i64,
    /// Its key.
    pub key: Option<Bytes>,
    /// Its value.
    pub value: Option<Bytes>,
    /// Its headers, in order.
    pub headers: Vec<(Bytes, Option<Bytes>)>,
    /// The region its key names, when the key is 8 bytes (big-endian), as
    /// the WAL writer writes it.
    pub region: Option<RegionId>,
    /// Where the record ends in its batch, in bytes from the batch's start
    /// (uncompressed batches).
    pub end: Option<usize>,
    /// What its per-record checksum header says of it.
    pub checksum: RecordCheck,
    /// Its encoded size inside its batch (uncompressed).
    pub wire_len: usize,
}

/// One batch as read back.
#[derive(Debug, Clone)]
pub struct LogBatch {
    /// Its header.
    pub header: BatchHeader,
    /// Its encoded length in bytes.
    pub len: usize,
    /// Its records, in order.
    pub records: Vec<LogRecord>,
}

impl LogBatch {
    /// Whether the batch is compressed.
    pub fn compressed(&self) -> bool {
        self.header.attributes.compression_id() != Compression::None.id()
    }
}

/// Where a read of a partition's log stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At the high watermark, with a consumer's fetches (which may wait at
    /// the end of the log).
    HighWatermark,
    /// At this offset, with fetches that never wait.
    Offset(i64),
}

/// Every batch of `topic`/`partition` from offset 0 to `until`, each once
/// and in order (a batch a fetch returns again from before its offset is
/// skipped).
pub async fn read_batches(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    until: Until,
) -> Result<Vec<LogBatch>, String> {
    let mut out: Vec<LogBatch> = Vec::new();
    let mut offset = 0;
    loop {
        let mut params = FetchParams::new(topic, partition, offset).with_max_bytes(8 << 20);
        match until {
            Until::Offset(end) if offset >= end => return Ok(out),
            Until::Offset(_) => params = params.with_max_wait(Duration::ZERO),
            Until::HighWatermark => {}
        }
        let fetched_at = offset;
        let at =
            move |e: &dyn std::fmt::Display| format!("{topic}/{partition} at {fetched_at}: {e}");
        let fetched = cluster.fetch(&params).await.map_err(|e| at(&e))?;
        if until == Until::HighWatermark && offset >= fetched.high_watermark {
            return Ok(out);
        }
        let before = offset;
        for batch in Batches::new(fetched.records.clone(), DecodeOptions::default()) {
            let batch = batch.map_err(|e| at(&e))?;
            if batch.last_offset() < offset {
                continue;
            }
            let mut records = Vec::new();
            for record in batch.records().map_err(|e| at(&e))? {
                let r = record.map_err(|e| at(&e))?;
                records.push(LogRecord {
                    offset: r.offset(),
                    timestamp: r.timestamp(),
                    key: r.key_bytes(),
                    value: r.value_bytes(),
                    headers: r
                        .headers()
                        .map(|h| {
                            (
                                Bytes::copy_from_slice(h.key),
                                h.value.map(Bytes::copy_from_slice),
                            )
                        })
                        .collect(),
                    region: r
                        .key()
                        .and_then(|k| <[u8; 8]>::try_from(k).ok())
                        .map(RegionId::from_be_bytes),
                    end: r.batch_range().map(|r| r.end),
                    checksum: r.check_checksum(),
                    wire_len: r.wire_len(),
                });
            }
            offset = batch.last_offset() + 1;
            out.push(LogBatch {
                header: *batch.header(),
                len: batch.bytes().len(),
                records,
            });
        }
        if offset <= before {
            return Err(format!(
                "{topic}/{partition}: no batch at {offset} ({} bytes answered)",
                fetched.records.len()
            ));
        }
    }
}

/// Every batch of `topic`/`partition` from offset 0 to the high watermark;
/// panics where a fetch fails or a batch does not decode.
pub async fn read_log(cluster: &Cluster, topic: &str, partition: i32) -> Vec<LogBatch> {
    read_batches(cluster, topic, partition, Until::HighWatermark)
        .await
        .unwrap_or_else(|e| panic!("reading the log back: {e}"))
}
