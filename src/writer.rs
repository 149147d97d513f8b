//! The WAL writer: appends entries of many regions to one partition and
//! builds the index while it writes.
//!
//! Entries are grouped into batches by size and a linger time, encoded by
//! the codec (any compression) and produced with `acks = all`, one batch in
//! flight at a time so offsets follow append order. Each entry's record has
//! the region id as its key (8 bytes, big-endian) — the rule `walfetch index
//! build --key` reads back — the payload as its value, and the caller's
//! headers. For every entry the index records its offset and the hints the
//! writer knows exactly: the batch's base offset and encoded length, and
//! where the entry's record ends inside the batch.
//!
//! Several writers may share a partition: their batches interleave, and
//! each writer's index covers its own batches; [`WalIndex::merge`] joins them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use walfetch_codec::{BatchBuilder, Compression, NewRecord};

use crate::cluster::Cluster;
use crate::error::Error;
use crate::index::{Hint, IdFormat, IndexEntry, IndexSource, RegionId, RegionRule, WalIndex};

/// Settings of a [`WalWriter`].
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Compression of each batch.
    pub compression: Compression,
    /// A batch is sent once its records reach this many bytes (before
    /// compression). Keep it under the broker's `message.max.bytes`.
    pub max_batch_bytes: usize,
    /// How long the first entry of a batch may wait for more.
    pub linger: Duration,
    /// Entries queued before `append` waits.
    pub queue: usize,
}

impl WriterConfig {
    /// Defaults for `topic`/`partition`: uncompressed, 256 KiB batches,
    /// 5 ms linger.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
            compression: Compression::None,
            max_batch_bytes: 256 << 10,
            linger: Duration::from_millis(5),
            queue: 16_384,
        }
    }
}

/// One entry to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    /// The region it belongs to.
    pub region: RegionId,
    /// The entry's bytes.
    pub payload: Bytes,
    /// Record headers.
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

impl WalEntry {
    /// An entry with no headers.
    pub fn new(region: RegionId, payload: impl Into<Bytes>) -> Self {
        Self {
            region,
            payload: payload.into(),
            headers: Vec::new(),
        }
    }

    /// The bytes this entry counts against [`WriterConfig::max_batch_bytes`]:
    /// its payload and headers plus a fixed allowance for the record's
    /// framing.
    pub fn batch_bytes(&self) -> usize {
        32 + self.payload.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 4)
                .sum::<usize>()
    }
}

struct Pending {
    entry: WalEntry,
    ack: oneshot::Sender<Result<i64, Error>>,
}

enum Command {
    Append(Pending),
    Flush(oneshot::Sender<()>),
}

/// The offset an appended entry got, once its batch is written.
#[derive(Debug)]
pub struct Appended(oneshot::Receiver<Result<i64, Error>>, String, i32);

impl std::future::Future for Appended {
    type Output = Result<i64, Error>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        std::pin::Pin::new(&mut this.0).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(Error::WriterClosed {
                    topic: this.1.clone(),
                    partition: this.2,
                })
            })
        })
    }
}

/// Appends WAL entries and builds their index; see the module docs.
#[derive(Debug)]
pub struct WalWriter {
    commands: mpsc::Sender<Command>,
    index: Arc<Mutex<WalIndex>>,
    task: JoinHandle<()>,
    topic: String,
    partition: i32,
}

impl WalWriter {
    /// Starts a writer on `cluster`.
    pub fn new(cluster: Arc<Cluster>, config: WriterConfig) -> Self {
        let (commands, queue) = mpsc::channel(config.queue.max(1));
        let mut fresh = WalIndex::new();
        // What it indexes: the topic id is added once the first batch is
        // written (its leader is then known).
        fresh.set_source(
            IndexSource::new(config.topic.clone(), config.partition)
                .with_rule(RegionRule::Key(IdFormat::BigEndian)),
        );
        let index = Arc::new(Mutex::new(fresh));
        let (topic, partition) = (config.topic.clone(), config.partition);
        let task = tokio::spawn(run(cluster, config, queue, Arc::clone(&index)));
        Self {
            commands,
            index,
            task,
            topic,
            partition,
        }
    }

    fn closed(&self) -> Error {
        Error::WriterClosed {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    /// Queues an entry (waiting while the queue is full); the returned
    /// future resolves to its offset once its batch is written.
    pub async fn append(&self, entry: WalEntry) -> Result<Appended, Error> {
        if entry.payload.len() > i32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes is too large for a Kafka record",
                entry.payload.len()
            )));
        }
        let (ack, offset) = oneshot::channel();
        self.commands
            .send(Command::Append(Pending { entry, ack }))
            .await
            .map_err(|_| self.closed())?;
        Ok(Appended(offset, self.topic.clone(), self.partition))
    }

    /// Waits until every entry queued so far is written (or failed).
    pub async fn flush(&self) -> Result<(), Error> {
        let (done, wait) = oneshot::channel();
        self.commands
            .send(Command::Flush(done))
            .await
            .map_err(|_| self.closed())?;
        wait.await.map_err(|_| self.closed())
    }

    /// The index of everything written so far.
    pub fn index(&self) -> WalIndex {
        lock(&self.index).clone()
    }

    /// Writes what is queued, stops the writer and returns the index.
    pub async fn close(self) -> Result<WalIndex, Error> {
        let flushed = self.flush().await;
        drop(self.commands);
        let _ = self.task.await;
        flushed?;
        let index = lock(&self.index).clone();
        Ok(index)
    }
}

fn lock(index: &Mutex<WalIndex>) -> MutexGuard<'_, WalIndex> {
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The writer task: collect a batch, write it, repeat.
async fn run(
    cluster: Arc<Cluster>,
    config: WriterConfig,
    mut queue: mpsc::Receiver<Command>,
    index: Arc<Mutex<WalIndex>>,
) {
    let mut carry: Option<Pending> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match queue.recv().await {
                Some(Command::Append(p)) => p,
                Some(Command::Flush(done)) => {
                    let _ = done.send(());
                    continue;
                }
                None => return,
            },
        };
        let deadline = tokio::time::Instant::now() + config.linger;
        let mut size = first.entry.batch_bytes();
        let mut batch = vec![first];
        let mut flushes = Vec::new();
        while size < config.max_batch_bytes {
            tokio::select! {
                command = queue.recv() => match command {
                    Some(Command::Append(p)) => {
                        if size + p.entry.batch_bytes() > config.max_batch_bytes {
                            carry = Some(p);
                            break;
                        }
                        size += p.entry.batch_bytes();
                        batch.push(p);
                    }
                    Some(Command::Flush(done)) => {
                        flushes.push(done);
                        break;
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        write_batch(&cluster, &config, batch, &index).await;
        for done in flushes {
            let _ = done.send(());
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Encodes, produces and indexes one batch, then answers its entries.
async fn write_batch(
    cluster: &Cluster,
    config: &WriterConfig,
    batch: Vec<Pending>,
    index: &Mutex<WalIndex>,
) {
    let timestamp = now_ms();
    let records: Vec<NewRecord> = batch
        .iter()
        .enumerate()
        .map(|(i, p)| NewRecord {
            offset_delta: i as i32,
            timestamp,
            key: Some(Bytes::copy_from_slice(&p.entry.region.to_be_bytes())),
            value: Some(p.entry.payload.clone()),
            headers: p.entry.headers.clone(),
        })
        .collect();
    let encoded = match BatchBuilder::new(0)
        .compression(config.compression)
        .encode(&records)
    {
        Ok(encoded) => encoded,
        Err(e) => {
            let what = e.to_string();
            for p in batch {
                let _ = p.ack.send(Err(Error::Encode {
                    topic: config.topic.clone(),
                    partition: config.partition,
                    source: walfetch_codec::Error::InvalidInput { what: what.clone() },
                }));
            }
            return;
        }
    };
    let batch_len = encoded.bytes.len() as u32;
    match cluster
        .produce(&config.topic, config.partition, encoded.bytes.clone())
        .await
    {
        Ok(base) => {
            let known = lock(index).source().topic_id.is_some();
            let topic_id = match known {
                true => None,
                false => cluster
                    .leader(&config.topic, config.partition)
                    .await
                    .ok()
                    .map(|l| l.topic_id),
            };
            {
                let mut index = lock(index);
                if let Some(id) = topic_id {
                    let source = index.source().clone().with_topic_id(id);
                    index.set_source(source);
                }
                for (i, p) in batch.iter().enumerate() {
                    let record_end = encoded
                        .record_end_in_batch(i)
                        .map_or(batch_len, |e| e as u32);
                    let entry = IndexEntry {
                        offset: base + i as i64,
                        hint: Some(Hint {
                            batch_base: base,
                            batch_len,
                            record_end,
                        }),
                    };
                    // Offsets from the broker only grow; a failure here means
                    // a broker reused offsets, which the index must not hide.
                    if let Err(e) = index.push(p.entry.region, entry) {
                        tracing::error!(error = %e, "WAL index rejected an entry");
                    }
                }
                index.set_last_index(base + batch.len() as i64 - 1);
            }
            for (i, p) in batch.into_iter().enumerate() {
                let _ = p.ack.send(Ok(base + i as i64));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, topic = %config.topic, partition = config.partition, "WAL batch not written");
            for p in batch {
                let _ = p.ack.send(Err(Error::Client(e.clone())));
            }
        }
    }
}
