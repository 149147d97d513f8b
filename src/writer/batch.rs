//! One batch of the WAL writer: its entries, its records, its encoding
//! for one producer stamp, and what it does itself once an answer decided
//! its fate (go back among the ready batches, split in two, say it may be
//! in the log); entries of a batch dropped unsettled are told so.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;
use walfetch_codec::{BatchBuilder, Batches, DecodeOptions, NewRecord, RecordsBuffer};

use tokio::sync::oneshot;

use crate::cluster::ProducerIdentity;
use crate::error::Error;
use crate::index::RegionId;

/// An entry the writer task took, as far as its batch's answer needs it:
/// its record is written into its batch as it is taken.
pub(super) struct Member {
    pub(super) region: RegionId,
    pub(super) ack: oneshot::Sender<Result<i64, Error>>,
}

/// A batch as encoded for one producer stamp.
pub(super) struct Encoded {
    pub(super) bytes: Bytes,
    /// Where each record ends in the batch (the batch length when
    /// compressed).
    pub(super) record_ends: Vec<u32>,
    /// The producer and base sequence it carries (idempotent writers).
    pub(super) stamp: Option<(ProducerIdentity, i32)>,
}

/// One batch: its entries, in order, and its state.
pub(super) struct Batch {
    /// The topic and partition it goes to (what its entries' errors name
    /// if it is dropped unsettled).
    pub(super) target: Arc<(String, i32)>,
    /// The writer's own count of batches, in the order they were formed.
    pub(super) number: u64,
    /// Where it is among the parts of batch `number` split after a
    /// refusal (a binary fraction: 0 for the first part or a batch never
    /// split), and how many times it was split: `(number, part)` is the
    /// order batches are sent in.
    pub(super) part: u64,
    pub(super) splits: u32,
    pub(super) entries: Vec<Member>,
    /// Its records, kept to encode them again under a new producer id.
    pub(super) records: RecordsBuffer,
    pub(super) encoded: Option<Encoded>,
    /// When it was first tried (the retry deadline runs from there).
    pub(super) first_try: Option<Instant>,
    /// Whether a request with it ever left: if so, the broker may have it.
    pub(super) sent: bool,
    /// Its entries' bytes, while counted in the writer's buffered bytes
    /// (until first sent or failed).
    pub(super) buffered: usize,
    pub(super) attempts: u32,
    /// Sent again under a new producer id after the broker refused its
    /// sequence (an expired producer): refused so again, it fails.
    pub(super) renewed: bool,
    /// The stamp of a request with it that reached the broker without an
    /// answer saying whether the broker appended it (the answer was lost):
    /// it may be in the log under that stamp. Before it is stamped anew it
    /// is looked for there ([`Task::resolve_maybe_written`]); failed, its
    /// entries' error says it may have been written.
    pub(super) maybe_written: Option<(ProducerIdentity, i32)>,
}

impl Drop for Batch {
    /// A batch dropped with entries not yet answered: the writer's task
    /// was stopped before it settled them (its runtime shut down; the task
    /// itself ends only once every batch is settled). An entry of a batch
    /// a request carried may be in the log, and says so
    /// ([`Error::MaybeWritten`]), instead of the bare "writer closed" its
    /// dropped acknowledgement would give, which says it was not written.
    fn drop(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        let (topic, partition) = (self.target.0.clone(), self.target.1);
        let in_doubt = self.sent || self.maybe_written.is_some();
        for member in self.entries.drain(..) {
            let error = match in_doubt {
                true => Error::MaybeWritten {
                    topic: topic.clone(),
                    partition,
                    source: crate::cluster::ClientError::Stopped {
                        operation: format!("Produce to topic {topic:?} partition {partition}"),
                    },
                },
                false => Error::WriterClosed {
                    topic: topic.clone(),
                    partition,
                },
            };
            let _ = member.ack.send(Err(error));
        }
    }
}

impl Batch {
    /// The producer stamp the batch was last encoded with, if any.
    pub(super) fn stamp(&self) -> Option<(ProducerIdentity, i32)> {
        self.encoded.as_ref().and_then(|e| e.stamp)
    }

    /// Marks the batch as possibly in the log under its last stamp (a
    /// request with it reached the broker and its answer was lost): it is
    /// looked for there before it is stamped anew.
    pub(super) fn may_be_written(&mut self) {
        self.maybe_written = self.stamp();
    }

    /// Puts the batch back among the `ready` ones by its number and part
    /// (it was formed before any batch still to be sent for the first
    /// time), to go again under a new producer id: its encoding is dropped
    /// when the producer id is (after it is looked for in the log under its
    /// stamp, if it may be there: `maybe_written`).
    pub(super) fn requeue(mut self, ready: &mut VecDeque<Batch>) {
        self.first_try = None;
        self.sent = false;
        self.attempts = 0;
        let at = ready.partition_point(|b| (b.number, b.part) < (self.number, self.part));
        ready.insert(at, self);
    }

    /// Splits a batch in two: it keeps its first half of entries and the
    /// second is returned, each with its records and neither encoded (they go
    /// again under the stamp they are given then); both keep its number, and
    /// the second's part puts it right after the first. Left as it was when
    /// its records cannot be split.
    pub(super) fn split_off_half(&mut self) -> Result<Batch, walfetch_codec::Error> {
        let batch = self;
        let at = batch.entries.len() / 2;
        // The second half's part: the first's with the next bit of the
        // fraction set (63 splits deep at most, far more than a batch's
        // entries ask for).
        let bit = (batch.splits < 63)
            .then(|| 1u64 << (63 - batch.splits))
            .ok_or_else(|| walfetch_codec::Error::InvalidInput {
                what: format!("a batch split {} times", batch.splits),
            })?;
        let (first, second) = split_records(&batch.records, at)?;
        batch.records = first;
        batch.splits += 1;
        batch.encoded = None;
        batch.maybe_written = None;
        batch.first_try = None;
        batch.sent = false;
        batch.attempts = 0;
        Ok(Batch {
            target: Arc::clone(&batch.target),
            number: batch.number,
            part: batch.part | bit,
            splits: batch.splits,
            entries: batch.entries.split_off(at),
            records: second,
            encoded: None,
            first_try: None,
            sent: false,
            attempts: 0,
            buffered: 0,
            renewed: batch.renewed,
            maybe_written: None,
        })
    }
}

/// `records` as two buffers, its first `at` records and the rest, each
/// numbered from offset delta 0: read back from an uncompressed encoding
/// of them (a split is rare, after a refusal, so not worth a codec path of
/// its own), their timestamps, keys, values and headers as they were.
fn split_records(
    records: &RecordsBuffer,
    at: usize,
) -> Result<(RecordsBuffer, RecordsBuffer), walfetch_codec::Error> {
    let encoded = BatchBuilder::new(0).encode_records(records)?;
    let batch = Batches::new(encoded.bytes, DecodeOptions::default())
        .next()
        .ok_or_else(|| walfetch_codec::Error::InvalidInput {
            what: "a batch encoded to split holds no batch".into(),
        })??;
    let half_bytes = records.encoded_len() / 2 + 64;
    let mut halves = (
        RecordsBuffer::with_capacity(half_bytes),
        RecordsBuffer::with_capacity(half_bytes),
    );
    for (i, record) in batch.records()?.enumerate() {
        let record = record?;
        let (half, delta) = match i < at {
            true => (&mut halves.0, i),
            false => (&mut halves.1, i - at),
        };
        half.push(&NewRecord {
            offset_delta: i32::try_from(delta).unwrap_or(i32::MAX),
            timestamp: record.timestamp(),
            key: record.key_bytes(),
            value: record.value_bytes(),
            headers: record
                .headers()
                .map(|h| (Bytes::copy_from_slice(h.key), h.value_bytes()))
                .collect(),
        })?;
    }
    if halves.0.len() + halves.1.len() != records.len() {
        return Err(walfetch_codec::Error::InvalidInput {
            what: format!(
                "{} records read back of {} to split",
                halves.0.len() + halves.1.len(),
                records.len()
            ),
        });
    }
    Ok(halves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_records_keep_their_fields_and_number_each_half_from_zero() {
        let mut records = RecordsBuffer::default();
        for i in 0..5 {
            records
                .push(&NewRecord {
                    offset_delta: i,
                    timestamp: 1_000 + i64::from(i) * 7,
                    key: Some(Bytes::from(vec![i as u8; 8])),
                    value: (i != 3).then(|| Bytes::from(format!("value {i}"))),
                    headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from(vec![i as u8])))],
                })
                .unwrap();
        }
        let (first, second) = split_records(&records, 2).unwrap();
        assert_eq!((first.len(), second.len()), (2, 3));
        let read = |half: &RecordsBuffer| {
            let bytes = BatchBuilder::new(0).encode_records(half).unwrap().bytes;
            let batch = Batches::new(bytes, DecodeOptions::default())
                .next()
                .unwrap()
                .unwrap();
            batch
                .records()
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    let header = r.headers().next().map(|h| h.value.unwrap().to_vec());
                    (
                        r.offset(),
                        r.timestamp(),
                        r.key_bytes(),
                        r.value_bytes(),
                        header,
                    )
                })
                .collect::<Vec<_>>()
        };
        let all = read(&records);
        let halves: Vec<_> = read(&first).into_iter().chain(read(&second)).collect();
        for (i, (whole, half)) in all.iter().zip(&halves).enumerate() {
            let want_offset = if i < 2 { i } else { i - 2 } as i64;
            assert_eq!(half.0, want_offset);
            assert_eq!(
                (&whole.1, &whole.2, &whole.3, &whole.4),
                (&half.1, &half.2, &half.3, &half.4)
            );
        }
        assert_eq!(halves.len(), 5);
    }
}
