//! Idempotent producers' state per partition, as a Kafka partition leader
//! keeps it: per producer id, its epoch and the sequence ranges of its last
//! five batches, to recognise a batch sent again and to refuse one that
//! skips a sequence.
//!
//! The rules, for a batch with a producer id (>= 0):
//! - an epoch below the producer's: `INVALID_PRODUCER_EPOCH`;
//! - a new epoch, or a producer id never seen: the sequence must be 0
//!   (`OUT_OF_ORDER_SEQUENCE_NUMBER`, or `UNKNOWN_PRODUCER_ID` for an id
//!   never seen);
//! - the same epoch: a batch whose first and last sequence match one of
//!   the five remembered is a duplicate, not appended again, and answered
//!   as [`DuplicateAnswer`] says (Kafka since 1.0: success with the
//!   original base offset); otherwise its first sequence must follow the
//!   last batch's last (`OUT_OF_ORDER_SEQUENCE_NUMBER`). Sequences wrap
//!   from `i32::MAX` to 0.
//!
//! # References
//! - KIP-98 (idempotent producer); Apache Kafka `ProducerStateManager` and
//!   `ProducerAppendInfo` (five batches per producer, the duplicate and
//!   sequence checks), KAFKA-5793 (duplicates answered with their offset).

use std::collections::{HashMap, VecDeque};

use kafka_protocol::ResponseError;
use walfetch_codec::BatchHeader;

/// How many batches of each producer a partition remembers.
pub const REMEMBERED_BATCHES: usize = 5;

/// How the broker answers a batch it already has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DuplicateAnswer {
    /// Success with the original base offset (Kafka since 1.0).
    #[default]
    OriginalOffset,
    /// The error `DUPLICATE_SEQUENCE_NUMBER` (Kafka 0.11).
    DuplicateSequenceNumber,
    /// Success with base offset -1 (a broker that knows it is a duplicate
    /// but not where the original is).
    NoOffset,
}

/// What to do with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Check {
    /// Append it.
    Append,
    /// Already appended at this base offset.
    Duplicate(i64),
    /// Refuse it: an error code and a message.
    Refused(i16, String),
}

#[derive(Debug, Clone, Copy)]
struct Cached {
    first: i32,
    last: i32,
    base_offset: i64,
}

#[derive(Debug, Clone, Default)]
struct Producer {
    epoch: i16,
    batches: VecDeque<Cached>,
}

/// One partition's producers.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerStates {
    producers: HashMap<i64, Producer>,
}

fn last_sequence(h: &BatchHeader) -> i32 {
    let last = i64::from(h.base_sequence) + i64::from(h.last_offset_delta);
    // Wraps past i32::MAX to 0.
    (last % (i64::from(i32::MAX) + 1)) as i32
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

impl ProducerStates {
    /// What to do with a batch with this header.
    pub(crate) fn check(&self, h: &BatchHeader) -> Check {
        if h.producer_id < 0 {
            return Check::Append;
        }
        let refuse = |code: ResponseError, msg: String| Check::Refused(code.code(), msg);
        let Some(p) = self.producers.get(&h.producer_id) else {
            return match h.base_sequence {
                0 => Check::Append,
                s => refuse(
                    ResponseError::UnknownProducerId,
                    format!(
                        "producer {} is unknown and its first batch has sequence {s}, not 0",
                        h.producer_id
                    ),
                ),
            };
        };
        if h.producer_epoch < p.epoch {
            return refuse(
                ResponseError::InvalidProducerEpoch,
                format!(
                    "producer {} epoch {} is older than {}",
                    h.producer_id, h.producer_epoch, p.epoch
                ),
            );
        }
        if h.producer_epoch > p.epoch {
            return match h.base_sequence {
                0 => Check::Append,
                s => refuse(
                    ResponseError::OutOfOrderSequenceNumber,
                    format!(
                        "producer {} epoch {}: a new epoch starts at sequence 0, not {s}",
                        h.producer_id, h.producer_epoch
                    ),
                ),
            };
        }
        let last = last_sequence(h);
        if let Some(c) = p
            .batches
            .iter()
            .find(|c| c.first == h.base_sequence && c.last == last)
        {
            return Check::Duplicate(c.base_offset);
        }
        let expected = p.batches.back().map_or(0, |c| next_sequence(c.last));
        if h.base_sequence != expected {
            return refuse(
                ResponseError::OutOfOrderSequenceNumber,
                format!(
                    "producer {} epoch {}: sequence {} received, {expected} expected",
                    h.producer_id, h.producer_epoch, h.base_sequence
                ),
            );
        }
        Check::Append
    }

    /// Records a batch appended at `base_offset`.
    pub(crate) fn appended(&mut self, h: &BatchHeader, base_offset: i64) {
        if h.producer_id < 0 {
            return;
        }
        let p = self.producers.entry(h.producer_id).or_default();
        if h.producer_epoch != p.epoch {
            p.epoch = h.producer_epoch;
            p.batches.clear();
        }
        p.batches.push_back(Cached {
            first: h.base_sequence,
            last: last_sequence(h),
            base_offset,
        });
        while p.batches.len() > REMEMBERED_BATCHES {
            p.batches.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use walfetch_codec::{BatchBuilder, NewRecord};

    use super::*;

    fn header(id: i64, epoch: i16, sequence: i32, records: i32) -> BatchHeader {
        let records: Vec<NewRecord> = (0..records).map(|i| NewRecord::value(i, "v")).collect();
        BatchBuilder::new(0)
            .producer(id, epoch, sequence)
            .encode(&records)
            .expect("batch")
            .header
    }

    fn code(check: Check) -> i16 {
        match check {
            Check::Refused(code, _) => code,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn duplicates_of_the_last_five_batches_and_sequence_gaps() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check(&header(-1, -1, -1, 3)), Check::Append);
        assert_eq!(
            code(s.check(&header(7, 0, 5, 1))),
            ResponseError::UnknownProducerId.code()
        );
        let mut offset = 100;
        for seq in (0..30).step_by(3) {
            let h = header(7, 0, seq, 3);
            assert_eq!(s.check(&h), Check::Append, "sequence {seq}");
            s.appended(&h, offset);
            offset += 3;
        }
        // The last five batches (sequences 15..30) are duplicates.
        assert_eq!(s.check(&header(7, 0, 27, 3)), Check::Duplicate(127));
        assert_eq!(s.check(&header(7, 0, 15, 3)), Check::Duplicate(115));
        // Older, or not matching a batch's range: out of order.
        for (seq, n) in [(12, 3), (27, 2), (31, 1)] {
            assert_eq!(
                code(s.check(&header(7, 0, seq, n))),
                ResponseError::OutOfOrderSequenceNumber.code(),
                "sequence {seq}"
            );
        }
        assert_eq!(s.check(&header(7, 0, 30, 1)), Check::Append);
        // Epochs: older refused, newer starts at 0.
        let newer = header(7, 1, 0, 1);
        assert_eq!(s.check(&newer), Check::Append);
        s.appended(&newer, 500);
        assert_eq!(
            code(s.check(&header(7, 0, 30, 1))),
            ResponseError::InvalidProducerEpoch.code()
        );
        assert_eq!(
            code(s.check(&header(7, 2, 4, 1))),
            ResponseError::OutOfOrderSequenceNumber.code()
        );
    }

    #[test]
    fn sequences_wrap() {
        let mut s = ProducerStates::default();
        let first = header(9, 0, 0, 1);
        s.appended(&first, 0);
        let near = header(9, 0, 1, 1);
        s.appended(&near, 1);
        let mut p = s.producers[&9].clone();
        p.batches.back_mut().expect("one").last = i32::MAX - 1;
        s.producers.insert(9, p);
        let wraps = header(9, 0, i32::MAX, 2);
        assert_eq!(last_sequence(&wraps), 0);
        assert_eq!(s.check(&wraps), Check::Append);
        s.appended(&wraps, 2);
        assert_eq!(s.check(&header(9, 0, 1, 1)), Check::Append);
    }
}
