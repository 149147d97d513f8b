//! GreptimeDB's WAL producer, as its Kafka log store runs it today, on
//! rskafka 0.6 (GreptimeDB's client): what the writer bench puts
//! walfetch's `WalWriter` beside.
//!
//! GreptimeDB's `OrderedBatchProducer` (`src/log-store/src/kafka/producer.rs`
//! and `worker*.rs` in GreptimeDB's repository, read for this bench) sends
//! each region write request to one background worker per partition over a
//! channel of 128. The worker takes the first request and up to 63 more
//! already queued (`REQUEST_BATCH_SIZE`), turns each request's records into
//! batches of at most `max_batch_bytes` (`aggregate_records`: a request's
//! remaining records are flushed alone, so one region per batch) and
//! produces them one after another, each awaited before the next
//! (`try_flush_pending_requests`), with no linger. Here one entry is one
//! region write request of one record, as the bench's workload has them;
//! the record carries the region id as its key and the entry's headers.

use std::collections::BTreeMap;
use std::sync::Arc;

use rskafka::chrono::{DateTime, Utc};
use rskafka::client::partition::{Compression as RsCompression, PartitionClient};
use rskafka::record::Record;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use walfetch::codec::Compression;
use walfetch::writer::WalEntry;

/// GreptimeDB's `REQUEST_BATCH_SIZE`: requests the worker takes at once.
const REQUEST_BATCH_SIZE: usize = 64;
/// GreptimeDB's `PRODUCER_CHANNEL_SIZE`.
const CHANNEL_SIZE: usize = REQUEST_BATCH_SIZE * 2;

/// Where a request's offset (or why it was not written) is sent.
type Answer = oneshot::Sender<Result<i64, String>>;

/// The producer of one partition: its channel and its worker.
pub(crate) struct GreptimeProducer {
    sender: mpsc::Sender<(WalEntry, Answer)>,
    worker: JoinHandle<()>,
}

impl GreptimeProducer {
    /// Starts the worker producing to `client`'s partition.
    pub(crate) fn new(client: Arc<PartitionClient>, compression: Compression) -> Self {
        let compression = match compression {
            Compression::Lz4 => RsCompression::Lz4,
            Compression::Zstd => RsCompression::Zstd,
            _ => RsCompression::NoCompression,
        };
        let (sender, receiver) = mpsc::channel(CHANNEL_SIZE);
        let worker = tokio::spawn(work(receiver, client, compression));
        Self { sender, worker }
    }

    /// Queues one region write request (waiting while the channel is
    /// full, as GreptimeDB's `produce` does); its offset comes on the
    /// receiver.
    pub(crate) async fn produce(
        &self,
        entry: WalEntry,
    ) -> Result<oneshot::Receiver<Result<i64, String>>, String> {
        let (answer, receiver) = oneshot::channel();
        self.sender
            .send((entry, answer))
            .await
            .map_err(|_| "GreptimeDB's producer worker stopped".to_owned())?;
        Ok(receiver)
    }

    /// Lets the worker finish what is queued, and stops it.
    pub(crate) async fn close(self) -> Result<(), String> {
        drop(self.sender);
        self.worker
            .await
            .map_err(|e| format!("GreptimeDB's producer worker: {e}"))
    }
}

/// The worker's loop: the first request and what else is queued, each
/// request produced alone, one after another.
async fn work(
    mut receiver: mpsc::Receiver<(WalEntry, Answer)>,
    client: Arc<PartitionClient>,
    compression: RsCompression,
) {
    let mut buffer = Vec::with_capacity(REQUEST_BATCH_SIZE);
    while let Some(first) = receiver.recv().await {
        buffer.push(first);
        while buffer.len() < REQUEST_BATCH_SIZE {
            match receiver.try_recv() {
                Ok(request) => buffer.push(request),
                Err(_) => break,
            }
        }
        for (entry, answer) in buffer.drain(..) {
            let result = client
                .produce(vec![record(&entry)], compression)
                .await
                .map_err(|e| e.to_string())
                .and_then(|offsets| {
                    offsets
                        .first()
                        .copied()
                        .ok_or_else(|| "no offset answered".to_owned())
                });
            let _ = answer.send(result);
        }
    }
}

/// The entry as one rskafka record.
fn record(entry: &WalEntry) -> Record {
    let headers: BTreeMap<String, Vec<u8>> = entry
        .headers
        .iter()
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(k).into_owned(),
                v.as_deref().unwrap_or_default().to_vec(),
            )
        })
        .collect();
    Record {
        key: Some(entry.region.to_be_bytes().to_vec()),
        value: Some(entry.payload.to_vec()),
        headers,
        timestamp: now(),
    }
}

/// The wall clock as a record timestamp (rskafka's chrono has no clock).
fn now() -> DateTime<Utc> {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    DateTime::from_timestamp_millis(millis).unwrap_or_default()
}
