//! The JSON shapes the CLI prints: one object per line.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Serialize;
use walfetch::codec::{Compression, Record, RecordBatch};

/// One record, as `dump` and `replay` print it. Binary fields are base64;
/// null stays null. `replay` adds the entry's region, topic and partition.
#[derive(Debug, Serialize)]
pub(crate) struct RecordLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<i32>,
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<(String, Option<String>)>,
}

impl RecordLine {
    pub(crate) fn new(record: &Record) -> Self {
        Self {
            region: None,
            topic: None,
            partition: None,
            offset: record.offset(),
            timestamp: record.timestamp(),
            key: record.key().map(|k| BASE64.encode(k)),
            value: record.value().map(|v| BASE64.encode(v)),
            headers: record
                .headers()
                .map(|h| {
                    (
                        String::from_utf8_lossy(h.key).into_owned(),
                        h.value.map(|v| BASE64.encode(v)),
                    )
                })
                .collect(),
        }
    }
}

impl RecordLine {
    /// The line of an entry of `region`, read from `topic`/`partition`.
    pub(crate) fn in_region(mut self, region: u64, topic: &str, partition: i32) -> Self {
        self.region = Some(region);
        self.topic = Some(topic.to_owned());
        self.partition = Some(partition);
        self
    }
}

/// One batch header, as `dump --batches` prints it.
#[derive(Debug, Serialize)]
pub(crate) struct BatchLine {
    position: usize,
    base_offset: i64,
    last_offset: i64,
    batch_length: i32,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    compression: &'static str,
    timestamp_type: &'static str,
    transactional: bool,
    control: bool,
    control_type: Option<i16>,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

impl BatchLine {
    pub(crate) fn new(batch: &RecordBatch, control_type: Option<i16>) -> Self {
        let h = batch.header();
        Self {
            position: batch.position(),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            batch_length: h.batch_length,
            partition_leader_epoch: h.partition_leader_epoch,
            magic: h.magic,
            crc: h.crc,
            compression: h.compression().map_or("unknown", Compression::name),
            timestamp_type: match h.attributes.timestamp_type() {
                walfetch::codec::TimestampType::CreateTime => "create_time",
                walfetch::codec::TimestampType::LogAppendTime => "log_append_time",
            },
            transactional: h.is_transactional(),
            control: h.is_control(),
            control_type,
            base_timestamp: h.base_timestamp,
            max_timestamp: h.max_timestamp,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            record_count: h.record_count,
        }
    }
}
