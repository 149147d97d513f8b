//! The fetch rules judged by Apache Kafka: the scripted broker (whose
//! rules, `walfetch_testkit::fetch_rules`, the floor is computed with) and
//! a real Kafka node hold the same record batches, byte for byte, and
//! answer the same seeded random Fetch requests; every partition of every
//! answer must agree: error code, high watermark, last stable offset, log
//! start offset, aborted transactions, preferred read replica, and the
//! record bytes themselves (the same batches, cut at the same byte).
//!
//! The log (16 partitions, see [`PartitionPlan`]): the five codecs; one
//! region per batch and interleaved; batches from under 100 bytes to
//! about 1 MB; committed and aborted transactions of two producers
//! interleaved, their control batches written by Kafka's coordinator,
//! and transactions left open (so the last stable offset trails the high
//! watermark); logs rolled into several 1 MiB segments; log starts moved
//! into the middle of a batch by DeleteRecords. The batches are written
//! to Kafka with raw Produce requests (CreateTime: Kafka stores them as
//! sent, offsets and leader epoch assigned), read back from Kafka, and
//! appended unchanged to the scripted broker.
//!
//! The requests: Fetch v4 to v11, both isolation levels, 1 to 16
//! partitions in random order, fetch offsets at, inside and at the end of
//! batches, at control batches, at and below the log start, at the last
//! stable offset, at and past the high watermark; `max_bytes` and
//! `partition_max_bytes` from 1 byte up.
//!
//! `WALFETCH_FETCH_RULES_SEED` fixes the seed (printed either way),
//! `WALFETCH_FETCH_RULES_REQUESTS` the number of requests (2,000). A
//! disagreement prints the smallest request that still shows it.
#![allow(clippy::unwrap_used)]

#[path = "fetch_rules_kafka/raw_producer.rs"]
mod raw_producer;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, FetchRequest, FetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use raw_producer::{produce, TxnProducer};
use walfetch::cluster::{Cluster, ClusterConfig};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::connection::{Connection, RequestOptions};
use walfetch_codec::Compression;
use walfetch_testkit::fetch_rules::extents_of;
use walfetch_testkit::{Habits, PartitionLog, ScriptedCluster};

const PARTITIONS: i32 = 16;
const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];
/// Record bytes of the largest batch: under Kafka's default
/// `message.max.bytes` (1,048,588) with the batch's own overhead.
const BIG_BATCH_BYTES: usize = 1_000_000;

/// What one partition's log is made of.
#[derive(Debug, Clone, Copy)]
struct PartitionPlan {
    compression: Compression,
    /// Records of many regions in one batch (else one region per batch).
    interleaved: bool,
    /// Batches of two transactional producers (and some plain ones).
    transactional: bool,
    /// A transaction left open at the end.
    open: bool,
    /// Some batches of 200 kB to 1 MB: the log spans several segments.
    big: bool,
    /// DeleteRecords moves the log start into the log.
    deleted: bool,
}

fn plan(p: i32) -> PartitionPlan {
    PartitionPlan {
        compression: CODECS[usize::try_from(p).unwrap() % CODECS.len()],
        interleaved: p % 2 == 1,
        transactional: p % 3 == 0,
        open: p == 9 || p == 15,
        big: p % 4 == 0 || p == 5,
        deleted: p % 3 == 2,
    }
}

/// Records for one batch under `plan`: tiny, small or big, keyed by
/// region, values part text (compressible) and part noise.
fn records(rng: &mut StdRng, plan: PartitionPlan, big: bool) -> Vec<NewRecord> {
    // Now: Kafka also rolls a segment once its batches' timestamps span
    // `segment.ms` (7 days), and its control batches carry the broker's
    // clock; the model rolls by size only.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
    let (count, value_len) = if big {
        let total = rng.random_range(200_000..=BIG_BATCH_BYTES);
        let count = rng.random_range(1..=20);
        (count, total / count - 40)
    } else if rng.random_bool(0.25) {
        (rng.random_range(1..=2), rng.random_range(0..=8))
    } else {
        (rng.random_range(1..=30), rng.random_range(10..=2_000))
    };
    let region = rng.random_range(0..8);
    (0..count)
        .map(|i| {
            let region = if plan.interleaved {
                rng.random_range(0..8)
            } else {
                region
            };
            let mut value = vec![0u8; value_len];
            let text = value_len / 2;
            for (j, b) in value[..text].iter_mut().enumerate() {
                *b = b"region wal entry "[j % 17];
            }
            rng.fill(&mut value[text..]);
            NewRecord {
                offset_delta: i32::try_from(i).unwrap(),
                timestamp: now + i64::try_from(i).unwrap(),
                key: Some(Bytes::from(format!("region-{region}"))),
                value: Some(value.into()),
                headers: Vec::new(),
            }
        })
        .collect()
}

/// One transactional producer's state in one partition.
struct TxnState {
    producer: TxnProducer,
    sequence: i32,
    open: bool,
}

/// Writes partition `p`'s log to Kafka under its [`plan`].
async fn write_partition(rng: &mut StdRng, connection: &Arc<Connection>, topic: &str, p: i32) {
    let plan = plan(p);
    let mut txns = Vec::new();
    if plan.transactional {
        for name in ["a", "b"] {
            let id = format!("{topic}-{p}-{name}");
            txns.push(TxnState {
                producer: TxnProducer::init(Arc::clone(connection), &id).await,
                sequence: 0,
                open: false,
            });
        }
    }
    let small = rng.random_range(30..=70);
    let bigs = if plan.big { rng.random_range(3..=5) } else { 0 };
    let mut kinds: Vec<bool> = (0..small)
        .map(|_| false)
        .chain((0..bigs).map(|_| true))
        .collect();
    // Big batches anywhere but first.
    let tail = &mut kinds[1..];
    for i in (1..tail.len()).rev() {
        tail.swap(i, rng.random_range(0..=i));
    }
    for big in kinds {
        let records = records(rng, plan, big);
        let count = i32::try_from(records.len()).unwrap();
        let builder = BatchBuilder::new(0).compression(plan.compression);
        if txns.is_empty() || rng.random_bool(0.2) {
            let batch = builder.encode(&records).unwrap().bytes;
            produce(connection, topic, p, batch, None).await;
            continue;
        }
        let which = rng.random_range(0..txns.len());
        let t = &mut txns[which];
        if !t.open {
            t.producer.add_partition(topic, p).await;
            t.open = true;
        }
        let (id, epoch) = t.producer.producer;
        let batch = builder
            .producer(id, epoch, t.sequence)
            .transactional(true)
            .encode(&records)
            .unwrap()
            .bytes;
        t.producer.produce(topic, p, batch).await;
        t.sequence += count;
        if rng.random_bool(0.35) {
            t.producer.end(rng.random_bool(0.6)).await;
            t.open = false;
        }
    }
    for (i, t) in txns.iter_mut().enumerate() {
        let leave_open = plan.open && i == 0;
        if t.open && !leave_open {
            t.producer.end(rng.random_bool(0.5)).await;
        } else if !t.open && leave_open {
            t.producer.add_partition(topic, p).await;
            let (id, epoch) = t.producer.producer;
            let batch = BatchBuilder::new(0)
                .compression(plan.compression)
                .producer(id, epoch, t.sequence)
                .transactional(true)
                .encode(&records(rng, plan, false))
                .unwrap()
                .bytes;
            t.producer.produce(topic, p, batch).await;
        }
    }
}

/// One Fetch request, as the test draws it.
#[derive(Debug, Clone)]
struct Fetch {
    version: i16,
    read_committed: bool,
    max_bytes: i32,
    /// `(partition, fetch offset, partition_max_bytes)`, in request order.
    partitions: Vec<(i32, i64, i32)>,
}

impl fmt::Display for Fetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Fetch v{} {} max_bytes {} partitions [",
            self.version,
            if self.read_committed {
                "read_committed"
            } else {
                "read_uncommitted"
            },
            self.max_bytes
        )?;
        for (i, (p, offset, max)) in self.partitions.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{p}@{offset} max {max}")?;
        }
        write!(f, "]")
    }
}

impl Fetch {
    fn request(&self, topic: &str) -> FetchRequest {
        let partitions = self
            .partitions
            .iter()
            .map(|&(p, offset, max)| {
                let mut part = FetchPartition::default()
                    .with_partition(p)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(max);
                if self.version >= 5 {
                    part = part.with_log_start_offset(-1);
                }
                if self.version >= 9 {
                    part = part.with_current_leader_epoch(-1);
                }
                part
            })
            .collect();
        let mut request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(i8::from(self.read_committed))
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(partitions)]);
        if self.version >= 7 {
            // A full fetch that creates no session (FINAL_EPOCH).
            request = request.with_session_id(0).with_session_epoch(-1);
        }
        request
    }
}

/// A byte limit from 1 up to `max`, spread evenly over its orders of
/// magnitude.
fn byte_limit(rng: &mut StdRng, max: u32) -> i32 {
    let bits = rng.random_range(0.0..f64::from(max).log2());
    i32::try_from((2f64.powf(bits) as u32).clamp(1, max)).unwrap()
}

/// A fetch offset of `log`: at, inside or at the end of a batch, at the
/// log start or below it, at the last stable offset, at or past the high
/// watermark, or anywhere.
fn fetch_offset(rng: &mut StdRng, log: &PartitionLog) -> i64 {
    let extents = log.extents();
    let batch = (!extents.is_empty()).then(|| extents[rng.random_range(0..extents.len())]);
    let start = log.log_start_offset();
    let hw = log.high_watermark();
    match (rng.random_range(0..10), batch) {
        (0, Some(b)) => b.base_offset.max(start),
        (1, Some(b)) if b.last_offset > b.base_offset => rng
            .random_range(b.base_offset + 1..=b.last_offset)
            .max(start),
        (2, Some(b)) => b.last_offset.max(start),
        (3, _) => start,
        (4, _) => start - rng.random_range(1..=3),
        (5, _) => hw,
        (6, _) => log.last_stable_offset(),
        (7, _) => hw + rng.random_range(1..=5),
        _ => rng.random_range(start..=hw),
    }
}

fn draw(rng: &mut StdRng, logs: &[PartitionLog]) -> Fetch {
    let mut order: Vec<i32> = (0..PARTITIONS).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    order.truncate(rng.random_range(1..=order.len()));
    let partitions = order
        .into_iter()
        .map(|p| {
            let log = &logs[usize::try_from(p).unwrap()];
            (p, fetch_offset(rng, log), byte_limit(rng, 2 << 20))
        })
        .collect();
    Fetch {
        version: rng.random_range(4..=11),
        read_committed: rng.random_bool(0.5),
        max_bytes: byte_limit(rng, 8 << 20),
        partitions,
    }
}

/// One partition of an answer, the fields compared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    partition: i32,
    error_code: i16,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// `(producer id, first offset)` of each aborted transaction listed.
    aborted: Option<Vec<(i64, i64)>>,
    preferred_read_replica: i32,
    records: Bytes,
}

fn answers(response: &FetchResponse) -> (i16, Vec<Answer>) {
    let parts = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| Answer {
            partition: p.partition_index,
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            log_start_offset: p.log_start_offset,
            aborted: p.aborted_transactions.as_ref().map(|list| {
                list.iter()
                    .map(|a| (a.producer_id.0, a.first_offset))
                    .collect()
            }),
            preferred_read_replica: p.preferred_read_replica.0,
            records: p.records.clone().unwrap_or_default(),
        })
        .collect();
    (response.error_code, parts)
}

/// The fields in which two answers to one partition differ.
fn differences(kafka: &Answer, scripted: &Answer) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |differs: bool, what| {
        if differs {
            out.push(what);
        }
    };
    check(kafka.partition != scripted.partition, "partition order");
    check(kafka.error_code != scripted.error_code, "error code");
    check(
        kafka.high_watermark != scripted.high_watermark,
        "high watermark",
    );
    check(
        kafka.last_stable_offset != scripted.last_stable_offset,
        "last stable offset",
    );
    check(
        kafka.log_start_offset != scripted.log_start_offset,
        "log start offset",
    );
    check(kafka.aborted != scripted.aborted, "aborted transactions");
    check(
        kafka.preferred_read_replica != scripted.preferred_read_replica,
        "preferred read replica",
    );
    check(kafka.records != scripted.records, "record bytes");
    out
}

/// Both brokers' connections and the topic.
struct Pair {
    kafka: Arc<Connection>,
    scripted: Arc<Connection>,
    topic: String,
}

/// What one request's answers disagree on: per partition (or -1 for the
/// response), the fields, and both answers.
type Disagreement = Vec<(i32, Vec<&'static str>, Option<Answer>, Option<Answer>)>;

impl Pair {
    async fn send(connection: &Connection, request: &FetchRequest, version: i16) -> FetchResponse {
        let options = RequestOptions {
            version: Some(version),
            timeout: Some(Duration::from_secs(30)),
        };
        connection
            .request_with(request, options)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", connection.broker()))
            .body
    }

    /// Sends `fetch` to both; what their answers disagree on (empty when
    /// they agree), and how many partitions were compared.
    async fn compare(&self, fetch: &Fetch) -> (Disagreement, usize) {
        let request = fetch.request(&self.topic);
        let kafka = answers(&Self::send(&self.kafka, &request, fetch.version).await);
        let scripted = answers(&Self::send(&self.scripted, &request, fetch.version).await);
        let mut out = Vec::new();
        if kafka.0 != scripted.0 {
            out.push((-1, vec!["response error code"], None, None));
        }
        let n = kafka.1.len().max(scripted.1.len());
        for i in 0..n {
            let (k, s) = (kafka.1.get(i), scripted.1.get(i));
            let fields = match (k, s) {
                (Some(k), Some(s)) => differences(k, s),
                _ => vec!["partition missing"],
            };
            if !fields.is_empty() {
                let p = k.or(s).map_or(-1, |a| a.partition);
                out.push((p, fields, k.cloned(), s.cloned()));
            }
        }
        (out, n)
    }

    /// The smallest request derived from `fetch` (partitions dropped one
    /// at a time, then the byte limit lowered) that still disagrees.
    async fn shrink(&self, mut fetch: Fetch) -> Fetch {
        let mut i = 0;
        while i < fetch.partitions.len() && fetch.partitions.len() > 1 {
            let mut smaller = fetch.clone();
            smaller.partitions.remove(i);
            if self.compare(&smaller).await.0.is_empty() {
                i += 1;
            } else {
                fetch = smaller;
            }
        }
        fetch
    }
}

/// Reads a partition's whole log back from Kafka, batch by batch, as
/// stored (offsets and leader epoch assigned, control batches included).
async fn stored_batches(kafka: &Connection, topic: &str, p: i32, hw: i64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < hw {
        let fetch = Fetch {
            version: 11,
            read_committed: false,
            max_bytes: 64 << 20,
            partitions: vec![(p, offset, 64 << 20)],
        };
        let (_, answer) = answers(&Pair::send(kafka, &fetch.request(topic), 11).await);
        let records = &answer[0].records;
        let extents = extents_of(records);
        assert!(
            !extents.is_empty(),
            "{topic}/{p} at {offset} below {hw}: no whole batch in {:?}",
            answer[0]
        );
        for e in &extents {
            out.push(records.slice(e.position..e.end()));
            offset = e.next_offset();
        }
    }
    out
}

/// Every partition's `(high watermark, last stable offset)` on Kafka.
async fn offsets(kafka: &Connection, topic: &str) -> Vec<(i64, i64)> {
    let fetch = Fetch {
        version: 11,
        read_committed: true,
        max_bytes: 1,
        partitions: (0..PARTITIONS).map(|p| (p, 0, 1)).collect(),
    };
    let (_, answer) = answers(&Pair::send(kafka, &fetch.request(topic), 11).await);
    answer
        .iter()
        .map(|a| (a.high_watermark, a.last_stable_offset))
        .collect()
}

/// Waits until the coordinator's transaction markers are all written:
/// every partition without an open transaction stable (LSO = HW), and
/// nothing changing for a second.
async fn markers_written(kafka: &Connection, topic: &str) -> Vec<(i64, i64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = Vec::new();
    loop {
        let now = offsets(kafka, topic).await;
        let stable = (0..PARTITIONS)
            .zip(&now)
            .all(|(p, (hw, lso))| plan(p).open || hw == lso);
        if stable && now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "markers not written: {now:?}");
        last = now;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Moves partition `p`'s log start on Kafka to `offset` (DeleteRecords).
async fn delete_records(kafka: &Connection, topic: &str, p: i32, offset: i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(p)
                .with_offset(offset)])]);
    let answer = kafka.request(&request).await.unwrap().body;
    let part = &answer.topics[0].partitions[0];
    assert_eq!(
        (part.error_code, part.low_watermark),
        (0, offset),
        "{answer:?}"
    );
}

/// Kafka's segment files of `topic`/`p` under `dir` (the node's
/// directory): `(name, bytes)`, for a disagreement's report.
fn segment_files(dir: &std::path::Path, topic: &str, p: i32) -> Vec<(String, u64)> {
    let wanted = format!("{topic}-{p}");
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if entry.file_name().to_string_lossy() != wanted {
                stack.push(path);
                continue;
            }
            let mut files: Vec<(String, u64)> = std::fs::read_dir(&path)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
                .map(|f| {
                    let len = f.metadata().map_or(0, |m| m.len());
                    (f.file_name().to_string_lossy().into_owned(), len)
                })
                .collect();
            files.sort();
            return files;
        }
    }
    Vec::new()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_broker_answers_every_fetch_as_kafka_does() {
    let seed = env_u64("WALFETCH_FETCH_RULES_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let requests = env_u64("WALFETCH_FETCH_RULES_REQUESTS").unwrap_or(2_000);
    eprintln!("fetch rules: seed {seed} (WALFETCH_FETCH_RULES_SEED), {requests} requests");
    let mut rng = StdRng::seed_from_u64(seed);

    let node = walfetch_support::kafka::shared();
    let topic = walfetch_support::kafka::unique_topic("fetch-rules");
    let kafka_cluster = Cluster::connect(node.cluster_config()).await.unwrap();
    let mut new = walfetch::cluster::NewTopic::new(&topic, PARTITIONS);
    new.configs
        .push(("message.timestamp.type".to_owned(), "CreateTime".to_owned()));
    kafka_cluster.create_topics(&[new]).await.unwrap();
    let kafka = kafka_cluster.connection(&node.address(0)).await.unwrap();
    for p in 0..PARTITIONS {
        write_partition(&mut rng, &kafka, &topic, p).await;
    }
    let offsets = markers_written(&kafka, &topic).await;

    let scripted_cluster = ScriptedCluster::builder()
        .habits(Habits {
            segment_bytes: u32::try_from(walfetch_support::kafka::SEGMENT_BYTES).unwrap(),
            ..Habits::KAFKA
        })
        .start()
        .await
        .unwrap();
    scripted_cluster.create_topic(&topic, PARTITIONS).unwrap();
    let mut stored = 0;
    for (p, &(hw, _)) in (0..PARTITIONS).zip(&offsets) {
        for batch in stored_batches(&kafka, &topic, p, hw).await {
            scripted_cluster.append_at(&topic, p, batch).unwrap();
            stored += 1;
        }
        if plan(p).deleted {
            let log = scripted_cluster.log(&topic, p).unwrap();
            let middle = log.extents()[log.extents().len() / 2];
            let offset = (middle.base_offset + 1).min(middle.last_offset);
            delete_records(&kafka, &topic, p, offset).await;
            scripted_cluster
                .advance_log_start(&topic, p, offset)
                .unwrap();
        }
    }
    let logs: Vec<PartitionLog> = (0..PARTITIONS)
        .map(|p| scripted_cluster.log(&topic, p).unwrap())
        .collect();
    let bytes: usize = logs.iter().map(PartitionLog::size).sum();
    eprintln!(
        "fetch rules: {stored} batches, {bytes} bytes in {PARTITIONS} partitions; (HW, LSO) {offsets:?}"
    );
    let scripted_client = Cluster::connect(ClusterConfig::new([scripted_cluster.bootstrap()]))
        .await
        .unwrap();
    let pair = Pair {
        kafka,
        scripted: scripted_client
            .connection(&scripted_cluster.bootstrap())
            .await
            .unwrap(),
        topic,
    };

    let mut compared = 0;
    let mut agreed = 0;
    let mut by_field: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures: Vec<(Fetch, Disagreement)> = Vec::new();
    for _ in 0..requests {
        let fetch = draw(&mut rng, &logs);
        let (disagreement, n) = pair.compare(&fetch).await;
        compared += n;
        agreed += usize::from(disagreement.is_empty());
        for (_, fields, _, _) in &disagreement {
            for f in fields {
                *by_field.entry(f).or_default() += 1;
            }
        }
        // Keep the first request of each kind of disagreement.
        let kind: Vec<_> = disagreement.iter().map(|d| d.1.clone()).collect();
        let seen = failures
            .iter()
            .any(|(_, d)| d.iter().map(|d| d.1.clone()).collect::<Vec<_>>() == kind);
        if !disagreement.is_empty() && !seen && failures.len() < 8 {
            failures.push((fetch, disagreement));
        }
    }
    eprintln!(
        "fetch rules: {requests} requests, {compared} partitions compared, {} requests disagreed; by field {by_field:?}",
        requests as usize - agreed
    );
    if failures.is_empty() {
        return;
    }
    let mut report = String::new();
    for (fetch, _) in failures {
        let small = pair.shrink(fetch).await;
        let (disagreement, _) = pair.compare(&small).await;
        report.push_str(&format!("\n{small}\n"));
        for (p, fields, k, s) in disagreement {
            let show = |a: &Option<Answer>| {
                a.as_ref().map(|a| {
                    format!(
                        "error {} hw {} lso {} start {} aborted {:?} replica {} records {} bytes {:?}",
                        a.error_code,
                        a.high_watermark,
                        a.last_stable_offset,
                        a.log_start_offset,
                        a.aborted,
                        a.preferred_read_replica,
                        a.records.len(),
                        extents_of(&a.records)
                            .iter()
                            .map(|e| (e.base_offset, e.len))
                            .collect::<Vec<_>>(),
                    )
                })
            };
            report.push_str(&format!(
                "  partition {p}: {fields:?}\n    kafka:    {:?}\n    scripted: {:?}\n    Kafka's segments: {:?}\n",
                show(&k),
                show(&s),
                segment_files(node.dir(), &pair.topic, p)
            ));
        }
    }
    panic!("the scripted broker disagrees with Kafka (seed {seed}):{report}");
}
