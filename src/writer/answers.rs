//! What a Produce answer does: a written batch indexed and its entries
//! answered; a duplicate or unreadable answer looked for in the log; a
//! refused batch sent again or failed.

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
            batch,
            behind_refused,
            ..
        }) = self.in_flight.pop_front()
        else {
            return;
        };
        let stamp = batch.encoded.as_ref().and_then(|e| e.stamp);
        let look_up = match &answer {
            Ok(base) if *base >= 0 => return self.written(batch, *base).await,
            // The broker has the batch but did not say where.
            Ok(_) => Some("acknowledged a duplicate without its offset"),
            Err(e) if e.code() == Some(ErrorCode::DuplicateSequenceNumber) => {
                Some("acknowledged a duplicate without its offset")
            }
            // The broker answered, but the answer cannot be read: the
            // batch may be in the log, and the log says.
            Err(ClientError::Connection(ConnectionError::Decode { .. })) => {
                Some("answered in a way that cannot be decoded")
            }
            Err(_) => None,
        };
        if let (Some(why), Some(stamp)) = (look_up, stamp) {
            let (cluster, topic) = (Arc::clone(&self.cluster), self.config.topic.clone());
            let found = locate(
                &cluster,
                &topic,
                self.config.partition,
                self.search_from,
                stamp,
            );
            let error = match found.await {
                Ok(Some(base)) => return self.written(batch, base).await,
                Ok(None) => ClientError::InvalidArgument(format!(
                    "topic {topic:?} partition {}: the broker {why} ({}), and no batch of \
                     producer {} epoch {} sequence {} is in the log from offset {} to its high \
                     watermark",
                    self.config.partition,
                    match &answer {
                        Ok(base) => format!("base offset {base}"),
                        Err(e) => e.to_string(),
                    },
                    stamp.0.id,
                    stamp.0.epoch,
                    stamp.1,
                    self.search_from
                )),
                Err(e) => e,
            };
            return self.fail(batch, &Error::Client(error));
        }
        let error = match answer {
            Ok(base) => ClientError::InvalidArgument(format!(
                "the broker acknowledged a batch with base offset {base}"
            )),
            Err(e) => e,
        };
        let sequence_refused = matches!(
            error.code(),
            Some(ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId)
        );
        if behind_refused && sequence_refused {
            // Refused because a batch before it was: not written, so it
            // can go again under the new producer id.
            batch_requeue(&mut self.ready, batch);
            return;
        }
        if sequence_refused && !batch.renewed && self.config.idempotent {
            // The first batch refused for its sequence, with none before
            // it: the broker no longer knows this producer (it expires an
            // idle one after `producer.id.expiration.ms`, a day by
            // default) or lost its state. It was not written: it goes
            // again, first, under a new producer id, as the Java producer
            // does (KIP-360); those behind it follow.
            let mut batch = batch;
            batch.renewed = true;
            batch_requeue(&mut self.ready, batch);
            self.reset_producer = true;
            for f in &mut self.in_flight {
                f.behind_refused = true;
            }
            return;
        }
        if !behind_refused && error.is_retriable(self.config.idempotent) {
            return self.retry_later(Some(batch), error);
        }
        // Refused for good (or, behind a refused batch, of unknown fate).
        self.fail(batch, &Error::Client(error));
        if self.config.idempotent {
            self.reset_producer = true;
            for f in &mut self.in_flight {
                f.behind_refused = true;
            }
        }
    }

    /// Indexes a written batch and answers its entries.
    pub(super) async fn written(&mut self, batch: Batch, base: i64) {
        let count = batch.entries.len() as i64;
        if base.checked_add(count).is_none() {
            // No log reaches past the largest offset: the answer is wrong,
            // and the entries' offsets cannot be told.
            let error = ClientError::InvalidArgument(format!(
                "the broker acknowledged a batch of {count} records at base offset {base}, past the largest offset"
            ));
            return self.fail(batch, &Error::Client(error));
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
                // Offsets from the broker only grow; a failure here means
                // a broker reused offsets, which the index must not hide.
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

/// Finds where the broker put a batch it answered without saying where
/// (a duplicate without its offset, an answer that cannot be decoded): the
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
