//! A batch's fate after an answer to a Produce with it: written, a
//! duplicate, back among the ready batches, again under a new producer id,
//! retried later, refused for good, or failed. Decided here, from the
//! answer and what the batch went with, for the side that handles answers
//! (`answers.rs`) and the side that drops requests in flight
//! (`sending.rs`, [`lost_answer`]).

use super::batch::Batch;
use crate::cluster::ClientError;
use crate::connection::ConnectionError;
use crate::error_code::ErrorCode;

/// What becomes of a batch once its Produce was answered.
#[derive(Debug)]
pub(super) enum Fate {
    /// Written at this base offset.
    Written(i64),
    /// The broker has it but did not say where (the answer, as text): it
    /// is looked for in the log.
    Duplicate(String),
    /// The answer cannot be read: the batch may be in the log, which says.
    Undecodable(ClientError),
    /// Not written (refused behind a refused batch, or for a reason that
    /// may pass): back among the ready batches, in its place.
    Requeue,
    /// Its answer lost behind a refused batch: looked for in the log under
    /// its stamp before it goes again.
    RequeueMaybeWritten,
    /// The first batch refused for its sequence: again, first, under a new
    /// producer id (KIP-360).
    RenewProducer,
    /// A failure that may pass: retried after a backoff.
    RetryLater(ClientError),
    /// Refused for good with nothing of it in the log: split when too
    /// large, else its entries fail.
    Refused(ClientError),
    /// Of unknown fate, or refused in a way that says the producer's state
    /// is wrong: its entries fail.
    Fail(ClientError),
}

impl Fate {
    /// The fate of `batch` after `answer`, sent `behind_refused` (while the
    /// writer waits out the batches behind a refused one) by a writer that
    /// is `idempotent` or not.
    pub(super) fn of(
        answer: Result<i64, ClientError>,
        batch: &Batch,
        behind_refused: bool,
        idempotent: bool,
    ) -> Fate {
        let error = match answer {
            Ok(base) if base >= 0 => return Fate::Written(base),
            Ok(base) => return Fate::Duplicate(format!("base offset {base}")),
            Err(e) if e.code() == Some(ErrorCode::DuplicateSequenceNumber) => {
                return Fate::Duplicate(e.to_string())
            }
            Err(e @ ClientError::Connection(ConnectionError::Decode { .. }))
                if batch.stamp().is_some() =>
            {
                return Fate::Undecodable(e)
            }
            Err(e) => e,
        };
        let sequence_refused = matches!(
            error.code(),
            Some(ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId)
        );
        // Whether the broker said it did not append the batch, for a
        // reason that may pass (not a lost answer, which leaves its fate
        // unknown).
        let not_written =
            sequence_refused || (error.is_retriable(idempotent) && !error.may_have_appended());
        if behind_refused && not_written {
            // Refused because a batch before it was (its sequence no longer
            // follows), or for a passing reason (`NOT_LEADER_OR_FOLLOWER`,
            // a leader election): not written, so it goes again under the
            // new producer id or sequence, once an earlier send of it whose
            // answer was lost has been looked for in the log.
            return Fate::Requeue;
        }
        if behind_refused && idempotent && error.may_have_appended() {
            // Its answer lost behind a refused batch: under Kafka's rules
            // it was not appended (its sequence no longer followed), but
            // the writer does not take a broker's word it never heard. It
            // is looked for in the log under this stamp before it is
            // stamped anew (`resolve_maybe_written`): found, it is written
            // there; not found, it goes again, in its place.
            return Fate::RequeueMaybeWritten;
        }
        if sequence_refused && !behind_refused && !batch.renewed && idempotent {
            // The first batch refused for its sequence, with none before
            // it: the broker no longer knows this producer (it expires an
            // idle one after `producer.id.expiration.ms`, a day by
            // default) or lost its state. This request was not written: it
            // goes again, first, under a new producer id, as the Java
            // producer does (KIP-360); those behind it follow. An earlier
            // send of it whose answer was lost may have been written: it is
            // looked for in the log first (`maybe_written`).
            return Fate::RenewProducer;
        }
        if !behind_refused && error.is_retriable(idempotent) {
            return Fate::RetryLater(error);
        }
        // Refused for good, and no earlier send of it may be in the log:
        // the broker appended nothing and its sequence for this producer
        // is where it was before the batch.
        if error.refused_batch_for_good() && batch.maybe_written.is_none() {
            return Fate::Refused(error);
        }
        Fate::Fail(error)
    }
}

/// A request with `batch` whose answer is dropped after `error` (the
/// answer that failed, `None` for one dropped unread behind it): the
/// broker may have appended it, so it is looked for in the log under its
/// stamp before it is stamped anew.
pub(super) fn lost_answer(batch: &mut Batch, error: Option<&ClientError>) {
    if error.is_none_or(ClientError::may_have_appended) {
        batch.may_be_written();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kafka_protocol::messages::ApiKey;
    use walfetch_codec::RecordsBuffer;

    use super::*;
    use crate::cluster::ProducerIdentity;
    use crate::writer::batch::Encoded;

    const STAMP: (ProducerIdentity, i32) = (ProducerIdentity { id: 7, epoch: 0 }, 40);

    /// A batch with no entries, encoded under [`STAMP`] or not at all.
    fn batch(stamped: bool) -> Batch {
        Batch {
            target: Arc::new(("wal".into(), 0)),
            number: 0,
            part: 0,
            splits: 0,
            entries: Vec::new(),
            records: RecordsBuffer::default(),
            encoded: stamped.then(|| Encoded {
                bytes: bytes::Bytes::new(),
                record_ends: Vec::new(),
                stamp: Some(STAMP),
            }),
            first_try: None,
            sent: true,
            buffered: 0,
            attempts: 0,
            renewed: false,
            maybe_written: None,
        }
    }

    fn kafka(code: ErrorCode) -> ClientError {
        ClientError::Kafka {
            api: ApiKey::Produce,
            code,
            topic: None,
            partition: None,
            broker: "b".into(),
            message: None,
        }
    }

    fn undecodable() -> ClientError {
        ClientError::Connection(ConnectionError::Decode {
            broker: "b".into(),
            api: ApiKey::Produce,
            version: 9,
            message: "garbled".into(),
        })
    }

    /// The fate's name, for comparing cases by table.
    fn name(fate: &Fate) -> &'static str {
        match fate {
            Fate::Written(_) => "written",
            Fate::Duplicate(_) => "duplicate",
            Fate::Undecodable(_) => "undecodable",
            Fate::Requeue => "requeue",
            Fate::RequeueMaybeWritten => "requeue-maybe-written",
            Fate::RenewProducer => "renew-producer",
            Fate::RetryLater(_) => "retry-later",
            Fate::Refused(_) => "refused",
            Fate::Fail(_) => "fail",
        }
    }

    /// A case: its name, the answer, whether the batch is stamped, sent
    /// behind a refused batch, by an idempotent writer; the fate's name.
    type Case = (
        &'static str,
        Result<i64, ClientError>,
        bool,
        bool,
        bool,
        &'static str,
    );

    #[test]
    fn each_answer_decides_one_fate() {
        use ErrorCode as E;
        // (case, answer, stamped, behind a refused batch, idempotent, fate)
        let cases: Vec<Case> = vec![
            ("offset", Ok(12), true, false, true, "written"),
            (
                "duplicate without offset",
                Ok(-1),
                true,
                false,
                true,
                "duplicate",
            ),
            (
                "duplicate sequence",
                Err(kafka(E::DuplicateSequenceNumber)),
                true,
                false,
                true,
                "duplicate",
            ),
            (
                "unreadable, stamped",
                Err(undecodable()),
                true,
                false,
                true,
                "undecodable",
            ),
            (
                "unreadable, no stamp",
                Err(undecodable()),
                false,
                false,
                false,
                "fail",
            ),
            (
                "sequence behind refused",
                Err(kafka(E::OutOfOrderSequenceNumber)),
                true,
                true,
                true,
                "requeue",
            ),
            (
                "not leader behind refused",
                Err(kafka(E::NotLeaderOrFollower)),
                true,
                true,
                true,
                "requeue",
            ),
            (
                "timed out behind refused",
                Err(kafka(E::RequestTimedOut)),
                true,
                true,
                true,
                "requeue-maybe-written",
            ),
            (
                "first sequence refusal",
                Err(kafka(E::OutOfOrderSequenceNumber)),
                true,
                false,
                true,
                "renew-producer",
            ),
            (
                "unknown producer",
                Err(kafka(E::UnknownProducerId)),
                true,
                false,
                true,
                "renew-producer",
            ),
            (
                "not leader",
                Err(kafka(E::NotLeaderOrFollower)),
                true,
                false,
                true,
                "retry-later",
            ),
            (
                "timed out, idempotent",
                Err(kafka(E::RequestTimedOut)),
                true,
                false,
                true,
                "retry-later",
            ),
            (
                "timed out, not idempotent",
                Err(kafka(E::RequestTimedOut)),
                false,
                false,
                false,
                "fail",
            ),
            (
                "too large",
                Err(kafka(E::MessageTooLarge)),
                true,
                false,
                true,
                "refused",
            ),
            (
                "corrupt records",
                Err(kafka(E::CorruptMessage)),
                true,
                false,
                true,
                "retry-later",
            ),
            (
                "invalid record",
                Err(kafka(E::InvalidRecord)),
                true,
                false,
                true,
                "refused",
            ),
            (
                "fenced",
                Err(kafka(E::ProducerFenced)),
                true,
                false,
                true,
                "fail",
            ),
        ];
        for (case, answer, stamped, behind_refused, idempotent, want) in cases {
            let fate = Fate::of(answer, &batch(stamped), behind_refused, idempotent);
            assert_eq!(name(&fate), want, "{case}: {fate:?}");
        }
    }

    #[test]
    fn a_renewed_batch_refused_again_for_its_sequence_fails() {
        let mut renewed = batch(true);
        renewed.renewed = true;
        let fate = Fate::of(
            Err(kafka(ErrorCode::OutOfOrderSequenceNumber)),
            &renewed,
            false,
            true,
        );
        assert_eq!(name(&fate), "fail", "{fate:?}");
    }

    #[test]
    fn a_refusal_of_a_batch_that_may_be_in_the_log_fails_it() {
        let mut maybe = batch(true);
        maybe.maybe_written = Some(STAMP);
        let fate = Fate::of(Err(kafka(ErrorCode::MessageTooLarge)), &maybe, false, true);
        assert_eq!(name(&fate), "fail", "{fate:?}");
    }

    #[test]
    fn a_lost_answer_marks_the_batch_as_maybe_written() {
        let mut lost = batch(true);
        lost_answer(&mut lost, Some(&kafka(ErrorCode::NotLeaderOrFollower)));
        assert_eq!(
            lost.maybe_written, None,
            "a refusal says it was not written"
        );
        lost_answer(&mut lost, Some(&kafka(ErrorCode::RequestTimedOut)));
        assert_eq!(lost.maybe_written, Some(STAMP));
        let mut unread = batch(true);
        lost_answer(&mut unread, None);
        assert_eq!(unread.maybe_written, Some(STAMP));
    }
}
