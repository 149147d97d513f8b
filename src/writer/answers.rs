//! What a Produce answer does: a written batch indexed and its entries
//! answered; a duplicate or unreadable answer looked for in the log; a
//! refused batch sent again or failed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use walfetch_codec::{Batches, DecodeOptions};

use super::sending::batch_requeue;
use super::{lock, Batch, Error, InFlight, Task};
use crate::cluster::{
    ClientError, Cluster, FetchParams, IsolationLevel, OffsetSpec, ProducerIdentity,
};
use crate::connection::ConnectionError;
use crate::error_code::ErrorCode;
use crate::index::{Hint, IndexEntry};

impl Task {
    /// Handles the answer to the request at the head of the pipeline.
    pub(super) async fn on_answer(&mut self, answer: Result<i64, ClientError>) {
        let Some(InFlight {
            mut batch,
            behind_refused,
            ..
        }) = self.in_flight.pop_front()
        else {
            return;
        };
        let error = match answer {
            Ok(base) if base >= 0 => return self.written(batch, base).await,
            // The broker has the batch but did not say where.
            Ok(base) => return self.duplicate(batch, format!("base offset {base}")).await,
            Err(e) if e.code() == Some(ErrorCode::DuplicateSequenceNumber) => {
                return self.duplicate(batch, e.to_string()).await
            }
            // The broker answered, but the answer cannot be read: the
            // batch may be in the log, and the log says.
            Err(e @ ClientError::Connection(ConnectionError::Decode { .. }))
                if stamp_of(&batch).is_some() =>
            {
                return self.undecodable(batch, e).await
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
        let not_written = sequence_refused
            || (error.is_retriable(self.config.idempotent) && !may_be_written(&error));
        if behind_refused && not_written {
            // Refused because a batch before it was (its sequence no longer
            // follows), or for a passing reason (`NOT_LEADER_OR_FOLLOWER`,
            // a leader election): not written, so it goes again under the
            // new producer id, once an earlier send of it whose answer was
            // lost has been looked for in the log.
            batch_requeue(&mut self.ready, batch);
            return;
        }
        if sequence_refused && !behind_refused && !batch.renewed && self.config.idempotent {
            // The first batch refused for its sequence, with none before
            // it: the broker no longer knows this producer (it expires an
            // idle one after `producer.id.expiration.ms`, a day by
            // default) or lost its state. This request was not written: it
            // goes again, first, under a new producer id, as the Java
            // producer does (KIP-360); those behind it follow. An earlier
            // send of it whose answer was lost may have been written: it is
            // looked for in the log first (`maybe_written`).
            batch.renewed = true;
            batch_requeue(&mut self.ready, batch);
            self.end_producer();
            return;
        }
        if !behind_refused && error.is_retriable(self.config.idempotent) {
            return self.retry_later(Some(batch), error);
        }
        // Refused for good (or, behind a refused batch, of unknown fate).
        self.fail(batch, &Error::Client(error));
    }

    /// A batch the broker answered as a duplicate without its offset (a
    /// base offset of -1, `DUPLICATE_SEQUENCE_NUMBER`): it is written, and
    /// looked for in the log. Not found, its entries fail saying they were
    /// written, at an offset unknown; the producer goes on, as the broker
    /// has the batch's sequence numbers.
    async fn duplicate(&mut self, mut batch: Batch, answer: String) {
        let found = match stamp_of(&batch) {
            Some(stamp) => self.locate(stamp).await.map(|found| (stamp, found)),
            None => Err(ClientError::InvalidArgument(format!(
                "the broker acknowledged a duplicate without its offset ({answer}) of a batch \
                 without a producer id"
            ))),
        };
        let error = match found {
            Ok((_, Some(base))) => return self.written(batch, base).await,
            Ok((stamp, None)) => ClientError::InvalidArgument(format!(
                "the broker acknowledged a duplicate without its offset ({answer}), and no batch \
                 of producer {} epoch {} sequence {} is in the log from offset {} to its high \
                 watermark",
                stamp.0.id, stamp.0.epoch, stamp.1, self.search_from
            )),
            Err(e) => e,
        };
        self.unbuffer(&mut batch);
        let written = |source: &ClientError| Error::WrittenOffsetUnknown {
            topic: self.config.topic.clone(),
            partition: self.config.partition,
            source: source.clone(),
        };
        tracing::warn!(error = %written(&error), entries = batch.entries.len(),
            "WAL batch written at an offset unknown");
        for p in batch.entries {
            let _ = p.ack.send(Err(written(&error)));
        }
    }

    /// A batch whose answer cannot be decoded (a broker's bug): looked for
    /// in the log, it is written where it is found; not found, it was not
    /// written, and its entries fail saying so.
    async fn undecodable(&mut self, mut batch: Batch, answer: ClientError) {
        let Some(stamp) = stamp_of(&batch) else {
            return self.fail(batch, &Error::Client(answer));
        };
        let error = match self.locate(stamp).await {
            Ok(Some(base)) => return self.written(batch, base).await,
            Ok(None) => {
                // No send of it is in the log, this one's or an earlier one's
                // (the same stamp): not written.
                batch.maybe_written = None;
                ClientError::InvalidArgument(format!(
                    "topic {:?} partition {}: the broker answered in a way that cannot be \
                     decoded ({answer}), and no batch of producer {} epoch {} sequence {} is in \
                     the log from offset {} to its high watermark",
                    self.config.topic,
                    self.config.partition,
                    stamp.0.id,
                    stamp.0.epoch,
                    stamp.1,
                    self.search_from
                ))
            }
            // Not known either way: the error says it may be written.
            Err(e) => {
                batch.maybe_written = Some(stamp);
                e
            }
        };
        self.fail(batch, &Error::Client(error));
    }

    /// Before the producer id is replaced: each ready batch that may have
    /// been written under the old one (a send of it reached the broker and
    /// its answer was lost) is looked for in the log. Found, it is written
    /// there; not found, it goes again under the new producer id; when the
    /// log cannot be read, its entries fail saying they may have been
    /// written. Never stamped anew while it may be in the log, no batch is
    /// written twice.
    pub(super) async fn resolve_maybe_written(&mut self) {
        if self.ready.iter().all(|b| b.maybe_written.is_none()) {
            return;
        }
        for mut batch in std::mem::take(&mut self.ready) {
            let Some(stamp) = batch.maybe_written else {
                self.ready.push_back(batch);
                continue;
            };
            match self.locate(stamp).await {
                Ok(Some(base)) => self.written(batch, base).await,
                Ok(None) => {
                    batch.maybe_written = None;
                    self.ready.push_back(batch);
                }
                Err(e) => self.fail(batch, &Error::Client(e)),
            }
        }
    }

    /// Where the batch of `stamp` is in the log, from past the writer's
    /// last acknowledged batch ([`locate`]). (The future holds no
    /// reference to the task, which is not `Sync`.)
    fn locate(
        &self,
        stamp: (ProducerIdentity, i32),
    ) -> impl Future<Output = Result<Option<i64>, ClientError>> + Send + 'static {
        let (cluster, topic) = (Arc::clone(&self.cluster), self.config.topic.clone());
        let (partition, from) = (self.config.partition, self.search_from);
        async move { locate(&cluster, &topic, partition, from, stamp).await }
    }

    /// Indexes a written batch and answers its entries.
    pub(super) async fn written(&mut self, batch: Batch, base: i64) {
        let count = batch.entries.len() as i64;
        // Offsets from the broker only grow: an answer at or below an offset
        // already indexed (a broker reusing offsets) would leave the entries
        // acknowledged but not indexed, and a replay by the index would
        // skip them (they are below its `last_index`).
        let last = lock(&self.index).last_index().filter(|&last| base <= last);
        let wrong = match (base.checked_add(count), last) {
            // No log reaches past the largest offset: the answer is wrong,
            // and the entries' offsets cannot be told.
            (None, _) => Some(format!(
                "the broker acknowledged a batch of {count} records at base offset {base}, past \
                 the largest offset"
            )),
            (_, Some(last)) => Some(format!(
                "the broker acknowledged a batch of {count} records at base offset {base}, at or \
                 below offset {last}, which it gave a batch acknowledged before"
            )),
            _ => None,
        };
        if let Some(wrong) = wrong {
            // The broker says it has the batch, but not where: it may be
            // in the log, unindexed.
            let error = Error::MaybeWritten {
                topic: self.config.topic.clone(),
                partition: self.config.partition,
                source: ClientError::InvalidArgument(wrong),
            };
            return self.fail(batch, &error);
        }
        let Some(encoded) = batch.encoded else {
            return;
        };
        let batch_len = u32::try_from(encoded.bytes.len()).unwrap_or(u32::MAX);
        let known = lock(&self.index).source().topic_id.is_some();
        let topic_id = match known {
            true => None,
            false => self
                .cluster
                .leader(&self.config.topic, self.config.partition)
                .await
                .ok()
                .map(|l| l.topic_id),
        };
        {
            let mut index = lock(&self.index);
            if let Some(id) = topic_id {
                let source = index.source().clone().with_topic_id(id);
                index.set_source(source);
            }
            for (i, p) in batch.entries.iter().enumerate() {
                let entry = IndexEntry {
                    offset: base + i as i64,
                    hint: Some(Hint {
                        batch_base: base,
                        batch_len,
                        record_end: encoded.record_ends.get(i).copied().unwrap_or(batch_len),
                    }),
                };
                // Cannot fail: the offsets are past every offset indexed
                // (checked above), and grow within the batch.
                if let Err(e) = index.push(p.region, entry) {
                    tracing::error!(error = %e, "WAL index rejected an entry");
                }
            }
            index.set_last_index(base + count - 1);
        }
        self.search_from = self.search_from.max(base + count);
        for (i, p) in batch.entries.into_iter().enumerate() {
            let _ = p.ack.send(Ok(base + i as i64));
        }
    }
}

/// The producer stamp `batch` was last encoded with, if any.
fn stamp_of(batch: &Batch) -> Option<(ProducerIdentity, i32)> {
    batch.encoded.as_ref().and_then(|e| e.stamp)
}

/// Whether a Produce that failed so may still have been appended: the
/// request was sent and its answer lost (the connection broke, the request
/// timed out) or unreadable, or the broker said the replicas did not
/// acknowledge the batch in time (`REQUEST_TIMED_OUT`,
/// `NOT_ENOUGH_REPLICAS_AFTER_APPEND`).
pub(super) fn may_be_written(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Connection(ConnectionError::Decode { .. })
    ) || (error.is_retriable(true) && !error.is_retriable(false))
}

/// Finds where the broker put a batch it answered without saying where
/// (a duplicate without its offset, an answer that cannot be decoded, an
/// answer lost): the
/// first batch from `from` (past the writer's last acknowledged batch)
/// with the same producer id, epoch and base sequence, or `None` when the
/// log holds none up to its high watermark.
async fn locate(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    from: i64,
    (id, sequence): (ProducerIdentity, i32),
) -> Result<Option<i64>, ClientError> {
    {
        let mut offset = from;
        loop {
            // The batch is there: no wait (Tansu 0.6 would sleep it out).
            let params = FetchParams::new(topic, partition, offset)
                .with_max_bytes(4 << 20)
                .with_max_wait(Duration::ZERO);
            let fetched = match cluster.fetch(&params).await {
                Ok(fetched) => fetched,
                // The log starts past `offset` now (retention): on from
                // its start.
                Err(e) if e.code() == Some(ErrorCode::OffsetOutOfRange) => {
                    let start = cluster
                        .list_offsets(
                            topic,
                            partition,
                            OffsetSpec::Earliest,
                            IsolationLevel::ReadUncommitted,
                        )
                        .await?
                        .offset
                        .unwrap_or(offset);
                    if start <= offset {
                        return Err(e);
                    }
                    offset = start;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut next = offset;
            for batch in Batches::new(fetched.records.clone(), DecodeOptions::default()) {
                let Ok(batch) = batch else { break };
                let h = batch.header();
                if h.producer_id == id.id
                    && h.producer_epoch == id.epoch
                    && h.base_sequence == sequence
                    && batch.last_offset() >= offset
                {
                    return Ok(Some(batch.base_offset()));
                }
                next = next.max(batch.last_offset() + 1);
            }
            if next == offset || next >= fetched.high_watermark {
                return Ok(None);
            }
            offset = next;
        }
    }
}
