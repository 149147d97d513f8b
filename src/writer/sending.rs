//! Sending formed batches: encoding them under the producer's stamp,
//! pipelining them, retrying after a failure, failing them for good.

use std::sync::Arc;

use tokio::time::Instant;
use walfetch_codec::BatchBuilder;

use super::fate::lost_answer;
use super::{Batch, Encoded, InFlight, Task};
use crate::cluster::{ClientError, IsolationLevel, LeaderLookup, OffsetSpec};
use crate::connection::Connection;
use crate::error::Error;

impl Task {
    /// Stops counting a batch's entries as buffered, and gives their
    /// bytes back to `append`.
    pub(super) fn unbuffer(&mut self, batch: &mut Batch) {
        let bytes = std::mem::take(&mut batch.buffered);
        self.buffered = self.buffered.saturating_sub(bytes);
        self.memory.give(bytes);
    }

    /// Fails a batch's entries with `error`, said as "may have been
    /// written" ([`Error::MaybeWritten`]) when a send of it reached the
    /// broker and its fate is unknown.
    pub(super) fn fail(&mut self, batch: Batch, error: &Error) {
        // Its sequence numbers were given out (sent or encoded ahead) and
        // will not reach the broker in order: the next batch would leave
        // a gap the broker refuses. Go on under a new producer id.
        if self.config.idempotent && batch.encoded.as_ref().is_some_and(|e| e.stamp.is_some()) {
            self.end_producer();
        }
        self.fail_entries(batch, error);
    }

    /// Fails a batch's entries as [`Task::fail`] does, leaving the
    /// producer as it is: for a batch the broker refused for good, whose
    /// sequence numbers are taken back ([`Task::rewind_sequence`]).
    pub(super) fn fail_entries(&mut self, mut batch: Batch, error: &Error) {
        self.unbuffer(&mut batch);
        let in_doubt = batch.maybe_written.is_some()
            || matches!(error, Error::Client(e) if e.may_have_appended());
        let (topic, partition) = (self.config.topic.clone(), self.config.partition);
        let make = |e: &Error| match e {
            Error::Client(c) if in_doubt => Error::MaybeWritten {
                topic: topic.clone(),
                partition,
                source: c.clone(),
            },
            Error::Client(c) => Error::Client(c.clone()),
            Error::MaybeWritten { source, .. } => Error::MaybeWritten {
                topic: topic.clone(),
                partition,
                source: source.clone(),
            },
            Error::EntryTooLarge {
                topic,
                partition,
                bytes,
                source,
            } => Error::EntryTooLarge {
                topic: topic.clone(),
                partition: *partition,
                bytes: *bytes,
                source: source.clone(),
            },
            Error::Encode {
                topic,
                partition,
                source,
            } => Error::Encode {
                topic: topic.clone(),
                partition: *partition,
                source: walfetch_codec::Error::InvalidInput {
                    what: source.to_string(),
                },
            },
            other => Error::InvalidArgument(other.to_string()),
        };
        tracing::warn!(error = %make(error), topic = %self.config.topic, partition = self.config.partition,
            entries = batch.entries.len(), "WAL batch not written");
        for p in std::mem::take(&mut batch.entries) {
            let _ = p.ack.send(Err(make(error)));
        }
    }

    /// Ends the producer's sequence: a new producer id is taken once the
    /// requests in flight are answered, and those requests, which the
    /// broker refuses for their sequence, go again under it.
    pub(super) fn end_producer(&mut self) {
        self.reset_producer = true;
        for f in &mut self.in_flight {
            f.behind_refused = true;
        }
    }

    /// Takes the producer's sequence back to `sequence`, that of a batch
    /// the broker refused for good (it appended nothing, and its sequence
    /// for the producer stops before the batch): once the requests in
    /// flight, refused for their sequence, are answered, the batches that
    /// follow are numbered again from there under the same producer id.
    /// A later refusal before then changes nothing (its sequence is past
    /// this one); a new producer id, if one is to be taken, wins.
    pub(super) fn rewind_sequence(&mut self, sequence: i32) {
        self.rewind.get_or_insert(sequence);
        for f in &mut self.in_flight {
            f.behind_refused = true;
        }
    }

    /// Sends ready batches while the pipeline has room.
    pub(super) async fn send_ready(&mut self) {
        while self.in_flight.len() < self.config.max_in_flight
            && !self.ready.is_empty()
            && self.resume_at.is_none()
        {
            if self.reset_producer || self.rewind.is_some() {
                if !self.in_flight.is_empty() {
                    return;
                }
                // What was sent under the old stamps and may be in the log
                // is looked for there before anything is stamped anew:
                // found, it is written; only the rest go again.
                self.resolve_maybe_written().await;
                // (Which may have ended the producer: a new id wins.)
                match (self.reset_producer, self.rewind.take()) {
                    (true, _) => self.producer = None,
                    (false, Some(sequence)) => self.next_sequence = sequence,
                    (false, None) => {}
                }
                self.reset_producer = false;
                for batch in &mut self.ready {
                    batch.encoded = None;
                }
                continue;
            }
            if self.config.idempotent && self.producer.is_none() {
                match self
                    .cluster
                    .init_producer_id(&self.config.topic, self.config.partition)
                    .await
                {
                    Ok(id) => {
                        tracing::debug!(
                            producer_id = id.id,
                            epoch = id.epoch,
                            "WAL writer producer id"
                        );
                        self.producer = Some(id);
                        self.next_sequence = 0;
                        // Its batches can only be past the log's end as
                        // of now: where a duplicate answered without its
                        // offset is looked for (not from offset 0).
                        let end = self
                            .cluster
                            .list_offsets(
                                &self.config.topic,
                                self.config.partition,
                                OffsetSpec::Latest,
                                IsolationLevel::ReadUncommitted,
                            )
                            .await;
                        if let Ok(Some(end)) = end.map(|e| e.offset) {
                            self.search_from = self.search_from.max(end);
                        }
                    }
                    Err(e) => {
                        let error = Error::Client(e);
                        while let Some(batch) = self.ready.pop_front() {
                            self.fail(batch, &error);
                        }
                        return;
                    }
                }
            }
            let connection = match self.leader_connection().await {
                Ok(Some(connection)) => connection,
                // Throttled, or the leader's lookup paced: sends wait
                // (`resume_at`), answers do not.
                Ok(None) => return,
                Err(e) => {
                    // A try, as a send is: the backoff grows with each
                    // failed lookup instead of asking every 25–50 ms.
                    if let Some(front) = self.ready.front_mut() {
                        front.attempts += 1;
                    }
                    // Waits out a backoff (`resume_at`), or, out of
                    // retries, failed the batches past their deadline:
                    // then the rest are tried now, not left waiting for
                    // an append to wake the writer.
                    self.retry_later(None, e);
                    continue;
                }
            };
            // Requests in flight stay on one connection, so they stay in
            // order; a new leader waits for them.
            if self
                .in_flight
                .back()
                .is_some_and(|f| !Arc::ptr_eq(&f.connection, &connection))
            {
                return;
            }
            let Some(mut batch) = self.ready.pop_front() else {
                return;
            };
            self.unbuffer(&mut batch);
            if batch.encoded.is_none() {
                match self.encode(&batch) {
                    Ok(encoded) => batch.encoded = Some(encoded),
                    Err(e) => {
                        let error = Error::Encode {
                            topic: self.config.topic.clone(),
                            partition: self.config.partition,
                            source: e,
                        };
                        self.fail(batch, &error);
                        continue;
                    }
                }
            }
            let Some(bytes) = batch.encoded.as_ref().map(|e| e.bytes.clone()) else {
                continue;
            };
            batch.first_try.get_or_insert_with(Instant::now);
            batch.sent = true;
            batch.attempts += 1;
            let answer = self
                .cluster
                .produce_queued(
                    Arc::clone(&connection),
                    &self.config.topic,
                    self.config.partition,
                    bytes,
                )
                .await;
            self.in_flight.push_back(InFlight {
                batch,
                answer,
                connection,
                behind_refused: false,
            });
        }
    }

    /// The leader's connection, or `None` while a throttled answer from
    /// the leader holds requests to it back (KIP-219), or while the
    /// leader is not known and the topic's metadata may not be read again
    /// yet (read at most once a backoff, see [`Cluster::leader`]): then
    /// nothing is sent until then (`resume_at`), and the task goes on
    /// reading answers and taking entries meanwhile (the pool, or the
    /// lookup, would hold it in a wait instead, and the answers of batches
    /// already written).
    ///
    /// [`Cluster::leader`]: crate::cluster::Cluster::leader
    async fn leader_connection(&mut self) -> Result<Option<Arc<Connection>>, ClientError> {
        let (topic, partition) = (&self.config.topic, self.config.partition);
        let leader = match self.cluster.leader_unless_paced(topic, partition).await? {
            LeaderLookup::Found(leader) => leader,
            LeaderLookup::ReadAt(at) => {
                self.resume_at = Some(at);
                return Ok(None);
            }
        };
        if let Some(until) = self.cluster.throttled_until(&leader.address) {
            self.resume_at = Some(until);
            return Ok(None);
        }
        match self.cluster.connection(&leader.address).await {
            Ok(connection) => Ok(Some(connection)),
            Err(e) => {
                // The leader metadata named is unreachable (a broker that
                // crashed, or moved to another address): the next lookup
                // reads metadata again, which names the new leader once
                // one is elected, instead of the cached one until the
                // batches run out of retries.
                if e.invalidates_metadata() {
                    self.cluster.invalidate_after_error(topic);
                }
                Err(e)
            }
        }
    }

    /// Encodes a batch, stamped with the producer and its next sequence
    /// numbers when idempotent.
    pub(super) fn encode(&mut self, batch: &Batch) -> Result<Encoded, walfetch_codec::Error> {
        let records = &batch.records;
        let mut builder = BatchBuilder::new(0).compression(self.config.compression);
        let stamp = self.producer.map(|id| (id, self.next_sequence));
        if let Some((id, sequence)) = stamp {
            builder = builder.producer(id.id, id.epoch, sequence);
        }
        let encoded = builder.encode_records(records)?;
        if stamp.is_some() {
            // Sequences wrap at i32::MAX, as Kafka's do.
            let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
            self.next_sequence = match self.next_sequence.checked_add(count) {
                Some(next) => next,
                None => count - (i32::MAX - self.next_sequence) - 1,
            };
        }
        let batch_len = u32::try_from(encoded.bytes.len()).unwrap_or(u32::MAX);
        let record_ends = (0..records.len())
            .map(|i| {
                encoded
                    .record_end_in_batch(i)
                    .map_or(batch_len, |e| u32::try_from(e).unwrap_or(batch_len))
            })
            .collect();
        Ok(Encoded {
            bytes: encoded.bytes,
            record_ends,
            stamp,
        })
    }

    /// After a failure before or at the head of the pipeline that may be
    /// retried: every request in flight is dropped and its batch goes back,
    /// in order, in front of the ready ones (same encoding, same sequence
    /// numbers), to be sent again after a backoff. `head` is the batch
    /// whose answer failed, if one did.
    pub(super) fn retry_later(&mut self, head: Option<Batch>, error: ClientError) {
        let mut again: Vec<Batch> = Vec::new();
        if let Some(mut head) = head {
            lost_answer(&mut head, Some(&error));
            again.push(head);
        }
        // Their answers are dropped unread.
        again.extend(self.in_flight.drain(..).map(|f| {
            let mut batch = f.batch;
            lost_answer(&mut batch, None);
            batch
        }));
        for batch in again.into_iter().rev() {
            self.ready.push_front(batch);
        }
        let policy = self.cluster.config().retry;
        // Every batch waiting is held up from now: each one's deadline
        // runs from here, not from when the batches before it gave up.
        let now = Instant::now();
        for batch in &mut self.ready {
            batch.first_try.get_or_insert(now);
        }
        let Some(front) = self.ready.front_mut() else {
            return;
        };
        let since = front.first_try.unwrap_or(now);
        let attempts = front.attempts.max(1);
        let delay = policy.random_backoff(attempts);
        // A batch that was sent has the retry deadline on top of the time
        // one answer may take (as the Java producer's `delivery.timeout.ms`
        // is at least `linger.ms` + `request.timeout.ms`): a batch whose
        // answer timed out is sent again, not failed at once.
        let deadline = match front.sent {
            true => policy
                .deadline
                .saturating_add(self.cluster.config().produce_answer_timeout()),
            false => policy.deadline,
        };
        if since.elapsed() + delay < deadline {
            tracing::debug!(%error, attempts, ?delay, "WAL writer retries");
            self.resume_at = Some(Instant::now() + delay);
            return;
        }
        // Out of retries: the head fails, and so does every batch sent
        // after it (its fate is unknown: sending it under a new producer
        // id could append it twice; their errors say they may have been
        // written). The rest go under a new producer id.
        let error = Error::Client(ClientError::RetriesExhausted {
            operation: format!(
                "Produce to topic {:?} partition {}",
                self.config.topic, self.config.partition
            ),
            attempts,
            elapsed: since.elapsed(),
            deadline,
            last: Some(Box::new(error)),
        });
        // (`fail` takes a new producer id for what follows: their sequence
        // numbers were given out.)
        if let Some(head) = self.ready.pop_front() {
            self.fail(head, &error);
        }
        while self.ready.front().is_some_and(|b| b.sent) {
            if let Some(batch) = self.ready.pop_front() {
                self.fail(batch, &error);
            }
        }
    }
}
