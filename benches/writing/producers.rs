//! The writers the bench compares (walfetch's in its modes, GreptimeDB's
//! producer) and one timed run of one of them over the workload.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use rskafka::client::partition::OffsetAt;
use tokio::sync::mpsc;
use walfetch::cluster::Cluster;
use walfetch::index::{IndexEntry, WalIndex};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};

use super::greptime::GreptimeProducer;
use crate::workload::{Arrival, Written, WrittenEntry};
use crate::*;

/// What one writer run wrote, and its figures.
pub(crate) struct WriteRun {
    pub(crate) written: Written,
    pub(crate) row: WriteRow,
}

/// The record headers the writer wrote for an entry: the checksum header,
/// then the entry's own.
pub(crate) fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// A run's writer: walfetch's in a mode with so many requests in flight,
/// or GreptimeDB's producer on rskafka (`greptime.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Config {
    Walfetch(WriterMode, usize),
    Greptime,
}

/// The mode column of GreptimeDB's producer.
pub(crate) const GREPTIME_MODE: &str = "GreptimeDB's producer (rskafka 0.6)";

impl Config {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Config::Walfetch(mode, _) => mode.name(),
            Config::Greptime => GREPTIME_MODE,
        }
    }

    pub(crate) fn in_flight(self) -> usize {
        match self {
            Config::Walfetch(_, in_flight) => in_flight,
            Config::Greptime => 1,
        }
    }
}

/// A running writer of a run.
pub(crate) enum Producer {
    Walfetch(WalWriter),
    Greptime(GreptimeProducer),
}

/// An appended entry's offset to come.
pub(crate) type Pending = Pin<Box<dyn Future<Output = Result<i64, String>> + Send>>;

impl Producer {
    /// Starts `config`'s writer on `topic`.
    pub(crate) async fn start(
        config: Config,
        (cluster, rskafka): (&Arc<Cluster>, &rskafka::client::Client),
        args: &Args,
        topic: &str,
    ) -> Result<Self, String> {
        Ok(match config {
            Config::Walfetch(mode, in_flight) => Producer::Walfetch(WalWriter::new(
                Arc::clone(cluster),
                WriterConfig::new(topic.to_owned(), 0)
                    .with_mode(mode)
                    .with_max_in_flight(in_flight)
                    .with_compression(args.compression)
                    .with_max_batch_bytes(args.common.batch_bytes)
                    .with_linger(args.common.linger),
            )),
            Config::Greptime => {
                let client = harness::rskafka_partition(rskafka, topic, OffsetAt::Latest).await?;
                Producer::Greptime(GreptimeProducer::new(Arc::new(client), args.compression))
            }
        })
    }

    pub(crate) async fn append(&self, entry: WalEntry) -> Result<Pending, String> {
        Ok(match self {
            Producer::Walfetch(writer) => {
                let appended = writer.append(entry).await.map_err(|e| e.to_string())?;
                Box::pin(async move { appended.await.map_err(|e| e.to_string()) })
            }
            Producer::Greptime(producer) => {
                let answer = producer.produce(entry).await?;
                Box::pin(async move {
                    answer
                        .await
                        .map_err(|_| "the request was dropped".to_owned())?
                })
            }
        })
    }

    /// Flat out, the last entries go when they are appended rather than
    /// after a linger, as a producer's benchmark flushes (or closes) it
    /// after its last send: the linger would otherwise end every run.
    /// GreptimeDB's producer has no linger.
    pub(crate) async fn flush(&self) -> Result<(), String> {
        match self {
            Producer::Walfetch(writer) => writer.flush().await.map_err(|e| e.to_string()),
            Producer::Greptime(_) => Ok(()),
        }
    }

    /// Stops the writer; the index of what it wrote (GreptimeDB's: the
    /// offsets of `entries`, sorted by offset, no hints).
    pub(crate) async fn close(self, entries: &[WrittenEntry]) -> Result<WalIndex, String> {
        match self {
            Producer::Walfetch(writer) => writer.close().await.map_err(|e| e.to_string()),
            Producer::Greptime(producer) => {
                producer.close().await?;
                let mut index = WalIndex::new();
                for e in entries {
                    let entry = IndexEntry {
                        offset: e.offset,
                        hint: None,
                    };
                    index.push(e.region, entry).map_err(|e| e.to_string())?;
                }
                if let Some(last) = entries.last() {
                    index.set_last_index(last.offset);
                }
                Ok(index)
            }
        }
    }
}

/// Appends `arrivals` to `topic` with `producer`, `config`'s writer, at
/// their arrival times when `paced`, and measures it.
pub(crate) async fn write_run(
    (cluster, broker): (&Arc<Cluster>, &str),
    arrivals: &[Arrival],
    (producer, config): (Producer, Config),
    topic: &str,
    paced: bool,
) -> Result<WriteRun, String> {
    let writer = producer;
    // Acknowledgements are collected as they come, whatever their order.
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Instant, Pending)>();
    let n = arrivals.len();
    let collector = tokio::spawn(async move {
        let mut pending = FuturesUnordered::new();
        let mut out: Vec<Option<(Result<i64, String>, Duration)>> = vec![None; n];
        let mut open = true;
        loop {
            tokio::select! {
                next = rx.recv(), if open => match next {
                    Some((i, at, appended)) => pending.push(async move {
                        let r = appended.await;
                        (i, r, at.elapsed())
                    }),
                    None => open = false,
                },
                Some((i, r, latency)) = pending.next(), if !pending.is_empty() => {
                    out[i] = Some((r, latency));
                }
                else => break,
            }
        }
        (out, Instant::now())
    });
    let cpu_before = harness::cpu_time();
    let start = Instant::now();
    for (i, a) in arrivals.iter().enumerate() {
        if paced {
            tokio::time::sleep_until((start + Duration::from_micros(a.at_micros)).into()).await;
        }
        let at = Instant::now();
        let appended = writer
            .append(a.entry.clone())
            .await
            .map_err(|e| format!("{topic}: append: {e}"))?;
        tx.send((i, at, appended))
            .map_err(|_| format!("{topic}: the collector stopped"))?;
    }
    drop(tx);
    if !paced {
        writer
            .flush()
            .await
            .map_err(|e| format!("{topic}: flush: {e}"))?;
    }
    let (acks, last_ack) = collector
        .await
        .map_err(|e| format!("{topic}: collector: {e}"))?;
    let seconds = (last_ack - start).as_secs_f64();
    let cpu_ms = harness::cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64() * 1e3);
    let checksums = matches!(config, Config::Walfetch(..));
    let mut latencies = Vec::with_capacity(n);
    let mut entries = Vec::with_capacity(n);
    for (a, ack) in arrivals.iter().zip(acks) {
        let (offset, latency) = ack.ok_or_else(|| format!("{topic}: an entry was not answered"))?;
        let offset = offset.map_err(|e| format!("{topic}: an entry was not written: {e}"))?;
        latencies.push(latency);
        entries.push(WrittenEntry {
            offset,
            region: a.entry.region,
            payload: a.entry.payload.clone(),
            headers: workload::written_headers(&a.entry, checksums),
        });
    }
    latencies.sort_unstable();
    entries.sort_by_key(|e| e.offset);
    let index = writer
        .close(&entries)
        .await
        .map_err(|e| format!("{topic}: close: {e}"))?;
    let end = entries.last().map_or(0, |e| e.offset + 1);
    let layout = floor::scan(cluster, topic, 0, end).await?;
    let payload: usize = entries.iter().map(|e| e.payload.len()).sum();
    let p99 = quantile(&latencies, 0.99);
    let row = WriteRow {
        broker: broker.to_owned(),
        mode: config.name().to_owned(),
        in_flight: config.in_flight(),
        pace: if paced { "rate" } else { "flat out" }.to_owned(),
        entries: n,
        batches: layout.batches.len(),
        seconds,
        entries_per_s: n as f64 / seconds,
        mb_per_s: payload as f64 / seconds / 1e6,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: p99,
        max_ms: quantile(&latencies, 1.0),
        cpu_ms,
        runs: 1,
        round_entries_per_s: vec![n as f64 / seconds],
        round_p99_ms: vec![p99],
    };
    eprintln!(
        "  {broker} {:<11} {} in flight {:<8}: {:>7.0} entries/s {:>6.1} MB/s, p50 {:.2} ms p99 {:.2} ms, {} batches",
        row.mode, row.in_flight, row.pace, row.entries_per_s, row.mb_per_s, row.p50_ms, row.p99_ms, row.batches
    );
    Ok(WriteRun {
        written: Written {
            entries,
            index,
            end,
            batches: layout.batches.len(),
        },
        row,
    })
}
