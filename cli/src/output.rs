//! What the CLI prints and how: the JSON shapes (one object per line),
//! stdout that a reader may close early (`walfetch … | head`), and error
//! messages.

use std::fmt;
use std::io::{self, Write};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::Serialize;
use walfetch::codec::{Compression, Record, RecordBatch};

/// One record, as `dump` and `replay` print it. Binary fields are base64,
/// header keys too (Kafka's header keys are bytes: printed as text, two
/// keys that are not UTF-8 could print the same); null stays null.
/// `replay` adds the entry's region, topic and partition.
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
                .map(|h| (BASE64.encode(h.key), h.value.map(|v| BASE64.encode(v))))
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

    /// The line of a batch found at byte `position` of the input (a batch
    /// decoded on its own knows only its position in its own buffer).
    pub(crate) fn at(mut self, position: usize) -> Self {
        self.position = position;
        self
    }
}

/// Stdout was closed by its reader (`walfetch … | head -1`): not a
/// failure. `main` turns it into a clean exit with nothing on stderr.
#[derive(Debug)]
pub(crate) struct ClosedStdout;

impl fmt::Display for ClosedStdout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed")
    }
}

impl std::error::Error for ClosedStdout {}

/// The error for a failed write to stdout: [`ClosedStdout`] for a closed
/// pipe, the I/O error otherwise.
pub(crate) fn stdout_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        anyhow::Error::new(ClosedStdout)
    } else {
        anyhow::Error::new(e).context("writing to stdout")
    }
}

/// Writes formatted text to stdout (`println!` without its panic on a
/// closed pipe): `Err` is [`stdout_error`]'s.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(::std::format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// One line to stdout, flushed (stdout is line-buffered anyway).
pub(crate) fn write_line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// An error and its causes as one line, `outer: inner: …`, leaving out a
/// cause whose text the message before it already ends with (errors that
/// print their source in their own message, as `thiserror`'s
/// `"{path}: {source}"` do, would otherwise show it twice).
pub(crate) fn error_message(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || message.ends_with(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// Prints `err` as the command's error line, `walfetch: error: …`;
/// returns its message.
pub(crate) fn print_error(err: &anyhow::Error) -> String {
    let message = error_message(err);
    say!("walfetch: error: {message}");
    message
}

/// An index's `last_index` as people read it.
pub(crate) fn last_index(last: Option<i64>) -> String {
    last.map_or_else(|| "none".to_owned(), |l| l.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_repeated_in_its_context_is_printed_once() {
        let io = io::Error::new(io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(walfetch::index::IndexError::Io {
            path: "/x.idx".into(),
            source: io,
        });
        assert_eq!(error_message(&err), "/x.idx: no such file");
        let err = anyhow::Error::new(io::Error::new(io::ErrorKind::NotFound, "gone"))
            .context("reading /y");
        assert_eq!(error_message(&err), "reading /y: gone");
    }
}
