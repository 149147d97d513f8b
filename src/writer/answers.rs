//! What a Produce answer does: a written batch indexed and its entries
//! answered; a duplicate or unreadable answer looked for in the log; a
//! refused batch sent again or failed.

use std::future::Future;
use std::sync::Arc;

use walfetch_codec::{Batches, DecodeOptions};

use super::fate::Fate;
use super::{lock, Batch, Error, InFlight, Task};
use crate::cluster::{ClientError, Cluster, FetchParams, LeaderLookup, ProducerIdentity};
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
        match Fate::of(answer, &batch, behind_refused, self.config.idempotent) {
            Fate::Written(base) => self.written(batch, base).await,
            Fate::Duplicate(answer) => self.duplicate(batch, answer).await,
            Fate::Undecodable(error) => self.undecodable(batch, error).await,
            Fate::Requeue => batch.requeue(&mut self.ready),
            Fate::RequeueMaybeWritten => {
                batch.may_be_written();
                batch.requeue(&mut self.ready);
            }
            Fate::RenewProducer => {
                batch.renewed = true;
                batch.requeue(&mut self.ready);
                self.end_producer();
            }
            Fate::RetryLater(error) => self.retry_later(Some(batch), error),
            Fate::Refused(error) => self.refused(batch, error),
            Fate::Fail(error) => self.fail(batch, &Error::Client(error)),
        }
    }

    /// A batch the broker refused for good ([`ClientError::refused_batch_for_good`]), no send
    /// of it in the log: a batch of several entries too large for the
    /// broker is split in two, and the halves go again in its place (as
    /// the Java producer's `splitAndReenqueue`), so that only an entry too
    /// large alone fails ([`Error::EntryTooLarge`]); any other refusal
    /// fails its entries. Either way the producer keeps its id: the
    /// broker's sequence stopped before the batch, so what follows is
    /// numbered again from there ([`Task::rewind_sequence`]) once the
    /// requests behind it, refused for their sequence, are answered (as
    /// the Java transactional producer takes back the sequences behind a
    /// batch that failed for good), instead of asking for a new producer
    /// id each time.
    fn refused(&mut self, mut batch: Batch, error: ClientError) {
        if let Some((_, sequence)) = batch.stamp() {
            self.rewind_sequence(sequence);
        }
        let too_large = matches!(
            error.code(),
            Some(ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge)
        );
        if !too_large {
            return self.fail_entries(batch, &Error::Client(error));
        }
        let bytes = batch.encoded.as_ref().map_or(0, |e| e.bytes.len());
        if batch.entries.len() < 2 {
            let error = Error::EntryTooLarge {
                topic: self.config.topic.clone(),
                partition: self.config.partition,
                bytes,
                source: error,
            };
            return self.fail_entries(batch, &error);
        }
        let entries = batch.entries.len();
        match batch.split_off_half() {
            Ok(tail) => {
                tracing::warn!(%error, entries, bytes,
                    "WAL batch too large for the broker: split in two and sent again");
                // In its place, by number and part.
                tail.requeue(&mut self.ready);
                batch.requeue(&mut self.ready);
            }
            Err(e) => {
                tracing::error!(error = %e, "a WAL batch could not be split");
                self.fail_entries(batch, &Error::Client(error));
            }
        }
    }

    /// A batch the broker answered as a duplicate without its offset (a
    /// base offset of -1, `DUPLICATE_SEQUENCE_NUMBER`): it is written, and
    /// looked for in the log. Not found, its entries fail saying they were
    /// written, at an offset unknown; the producer goes on, as the broker
    /// has the batch's sequence numbers.
    async fn duplicate(&mut self, mut batch: Batch, answer: String) {
        let found = match batch.stamp() {
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
        for p in std::mem::take(&mut batch.entries) {
            let _ = p.ack.send(Err(written(&error)));
        }
    }

    /// A batch whose answer cannot be decoded (a broker's bug): looked for
    /// in the log, it is written where it is found; not found, it was not
    /// written, and its entries fail saying so.
    async fn undecodable(&mut self, mut batch: Batch, answer: ClientError) {
        let Some(stamp) = batch.stamp() else {
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

    /// Before the producer id is replaced or its sequence taken back: each
    /// ready batch that may have been written under the old stamp (a send
    /// of it reached the broker and its answer was lost) is looked for in
    /// the log, all of them in one read of it. Found, it is written there;
    /// not found, it goes again under the new stamp; when the log cannot
    /// be read, its entries fail saying they may have been written. Never
    /// stamped anew while it may be in the log, no batch is written twice.
    pub(super) async fn resolve_maybe_written(&mut self) {
        let stamps: Vec<_> = self.ready.iter().filter_map(|b| b.maybe_written).collect();
        if stamps.is_empty() {
            return;
        }
        let found = self.locate_all(stamps.clone()).await;
        for mut batch in std::mem::take(&mut self.ready) {
            let Some(stamp) = batch.maybe_written else {
                self.ready.push_back(batch);
                continue;
            };
            let at = stamps.iter().position(|s| *s == stamp);
            match (&found, at) {
                (Ok(bases), Some(i)) if bases[i].is_some() => {
                    let base = bases[i].unwrap_or_default();
                    self.written(batch, base).await;
                }
                (Ok(_), _) => {
                    batch.maybe_written = None;
                    self.ready.push_back(batch);
                }
                (Err(e), _) => self.fail(batch, &Error::Client(e.clone())),
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
        let all = self.locate_all(vec![stamp]);
        async move { Ok(all.await?.first().copied().flatten()) }
    }

    /// [`Task::locate`] for several stamps, in one read of the log: the
    /// base offset of each one's batch, in the order given.
    fn locate_all(
        &self,
        stamps: Vec<(ProducerIdentity, i32)>,
    ) -> impl Future<Output = Result<Vec<Option<i64>>, ClientError>> + Send + 'static {
        let (cluster, topic) = (Arc::clone(&self.cluster), self.config.topic.clone());
        let (partition, from) = (self.config.partition, self.search_from);
        async move { locate(&cluster, &topic, partition, from, &stamps).await }
    }

    /// Indexes a written batch and answers its entries.
    pub(super) async fn written(&mut self, mut batch: Batch, base: i64) {
        if self.rewind.is_some() && batch.stamp().is_some() {
            // Appended behind a batch refused for good: this broker does
            // not hold the sequence to Kafka's rules, and taking it back
            // could reuse numbers it has. A new producer id instead.
            self.end_producer();
        }
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
        let Some(encoded) = batch.encoded.take() else {
            return;
        };
        let batch_len = u32::try_from(encoded.bytes.len()).unwrap_or(u32::MAX);
        let known = lock(&self.index).source().topic_id.is_some();
        // (A lookup that would wait for the topic's next Metadata read
        // leaves the id to a later batch: the task does not wait.)
        let topic_id = match known {
            true => None,
            false => match self
                .cluster
                .leader_unless_paced(&self.config.topic, self.config.partition)
                .await
            {
                Ok(LeaderLookup::Found(leader)) => Some(leader.topic_id),
                _ => None,
            },
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
        for (i, p) in std::mem::take(&mut batch.entries).into_iter().enumerate() {
            let _ = p.ack.send(Ok(base + i as i64));
        }
    }
}

/// Answers in a row holding no batch below the high watermark after which
/// [`locate`] gives up ([`ClientError::NoRecords`]).
const MAX_EMPTY_ANSWERS: u32 = 10;

/// Finds where the broker put batches it answered without saying where
/// (a duplicate without its offset, an answer that cannot be decoded, an
/// answer lost): for each of `stamps` (producer id, epoch and base
/// sequence), the first batch from `from` (past the writer's last
/// acknowledged batch) that carries it, or `None` when the log holds none
/// up to its high watermark. One read of the log finds them all; it stops
/// once each is found.
///
/// A fetch may not wait (Tansu 0.6 would sleep it out, the batches at
/// hand); an answer with no batch below the high watermark (a broker that
/// could not read its storage in no time) is not "not in the log": the
/// fetch is asked again allowing a wait that grows with each such answer,
/// as [`crate::scan::build_index`] does, and after [`MAX_EMPTY_ANSWERS`]
/// in a row the search fails ([`ClientError::NoRecords`]): the batch may
/// be there, unseen.
async fn locate(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    from: i64,
    stamps: &[(ProducerIdentity, i32)],
) -> Result<Vec<Option<i64>>, ClientError> {
    let mut found: Vec<Option<i64>> = vec![None; stamps.len()];
    let mut offset = from;
    // Answers in a row with no batch below the high watermark.
    let mut empty = 0u32;
    while found.iter().any(Option::is_none) {
        let wait = crate::replay::unready_wait(empty);
        let params = FetchParams::new(topic, partition, offset)
            .with_max_bytes(4 << 20)
            .with_max_wait(wait);
        let fetched = match cluster.fetch(&params).await {
            Ok(fetched) => fetched,
            // The log starts past `offset` now (retention): on from its
            // start.
            Err(e) if e.code() == Some(ErrorCode::OffsetOutOfRange) => {
                let start = cluster.log_start(topic, partition).await?.unwrap_or(offset);
                if start <= offset {
                    return Err(e);
                }
                offset = start;
                continue;
            }
            Err(e) => return Err(e),
        };
        if offset >= fetched.high_watermark {
            // Read up to the high watermark.
            break;
        }
        let mut next = offset;
        for batch in Batches::new(fetched.records.clone(), DecodeOptions::default()) {
            let Ok(batch) = batch else { break };
            let h = batch.header();
            if batch.last_offset() >= offset {
                let stamp = |(id, sequence): &(ProducerIdentity, i32)| {
                    h.producer_id == id.id
                        && h.producer_epoch == id.epoch
                        && h.base_sequence == *sequence
                };
                for (at, _) in stamps.iter().enumerate().filter(|(_, s)| stamp(s)) {
                    found[at].get_or_insert(batch.base_offset());
                }
            }
            next = next.max(batch.last_offset() + 1);
        }
        if next == offset {
            // No batch read, records lying at `offset`: not read in time.
            empty += 1;
            if empty >= MAX_EMPTY_ANSWERS {
                return Err(ClientError::NoRecords {
                    topic: topic.to_string(),
                    partition,
                    offset,
                    high_watermark: fetched.high_watermark,
                    answers: empty,
                    last_wait: wait,
                });
            }
            continue;
        }
        empty = 0;
        if next >= fetched.high_watermark {
            break;
        }
        offset = next;
    }
    Ok(found)
}
