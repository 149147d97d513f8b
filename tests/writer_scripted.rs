//! The WAL writer against the scripted broker (Kafka's idempotence rules):
//! clustered and interleaved layouts, several requests in flight, and
//! answers lost (the connection cut after the append, or no answer at all
//! until the request times out) — the batches are sent again and the log
//! holds every entry once, regions in append order, the index exact.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
use walfetch::codec::Compression;
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::{Appended, WalEntry, WalWriter, WriterConfig, WriterMode};
use walfetch_testkit::{DuplicateAnswer, Fault, FaultAction, ScriptedCluster};

use support::wal_log::{check_written, read_log, Layout};

const TOPIC: &str = "wal";

async fn scripted() -> (ScriptedCluster, Arc<Cluster>) {
    scripted_with_deadline(Duration::from_secs(20)).await
}

/// A scripted broker and a cluster client whose retries end after
/// `deadline`.
async fn scripted_with_deadline(deadline: Duration) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline,
        ..RetryPolicy::default()
    };
    // A lost answer shows as a timeout after about a second.
    config.connection.request_timeout = Duration::from_millis(700);
    config.produce_timeout = Duration::from_millis(300);
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    (scripted, cluster)
}

/// `count` entries of 6 regions, skewed, with unique payloads.
fn entries(from: usize, count: usize) -> Vec<(RegionId, Bytes)> {
    (from..from + count)
        .map(|n| {
            let region = [1, 1, 1, 2, 2, 3, 4, 5, 6][n % 9] as RegionId;
            let payload = format!("entry {n} of region {region} {}", "x".repeat(n * 37 % 300));
            (region, Bytes::from(payload))
        })
        .collect()
}

fn config(mode: WriterMode) -> WriterConfig {
    WriterConfig::new(TOPIC, 0)
        .with_mode(mode)
        .with_max_batch_bytes(2 << 10)
        .with_linger(Duration::from_millis(3))
}

/// Appends `entries` without waiting between them; each entry's offset (or
/// error), in append order.
async fn append_all(
    writer: &WalWriter,
    entries: &[(RegionId, Bytes)],
) -> Vec<(RegionId, Bytes, Result<i64, Error>)> {
    let mut pending = Vec::new();
    for (region, payload) in entries {
        let appended = writer
            .append(WalEntry::new(*region, payload.clone()))
            .await
            .expect("queued");
        pending.push((*region, payload.clone(), appended));
    }
    let mut out = Vec::new();
    for (region, payload, appended) in pending {
        out.push((region, payload, appended.await));
    }
    out
}

fn written(results: Vec<(RegionId, Bytes, Result<i64, Error>)>) -> Vec<(RegionId, Bytes, i64)> {
    results
        .into_iter()
        .map(|(r, p, o)| (r, p, o.unwrap_or_else(|e| panic!("entry not written: {e}"))))
        .collect()
}

async fn write(
    cluster: &Arc<Cluster>,
    config: WriterConfig,
    entries: &[(RegionId, Bytes)],
) -> (Vec<(RegionId, Bytes, i64)>, WalIndex) {
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let results = written(append_all(&writer, entries).await);
    (results, writer.close().await.expect("closed"))
}

async fn check(cluster: &Cluster, appended: &[(RegionId, Bytes, i64)], index: &WalIndex) -> Layout {
    let log = read_log(cluster, TOPIC, 0).await;
    check_written(&log, appended, index, true)
}

#[tokio::test]
async fn clustered_batches_hold_one_region_interleaved_mix_them() {
    for (mode, compression) in [
        (WriterMode::Clustered, Compression::None),
        (WriterMode::Clustered, Compression::Lz4),
        (WriterMode::Interleaved, Compression::None),
    ] {
        let (_scripted, cluster) = scripted().await;
        let config = config(mode).with_compression(compression);
        let (appended, index) = write(&cluster, config, &entries(0, 600)).await;
        let layout = check(&cluster, &appended, &index).await;
        match mode {
            WriterMode::Clustered => assert_eq!(layout.mixed_batches, 0, "{layout:?}"),
            _ => assert!(layout.mixed_batches > 0, "{layout:?}"),
        }
        assert!(
            layout.pure_batches + layout.mixed_batches > 20,
            "{layout:?}"
        );
        assert_eq!(layout.producer_ids.len(), 1, "one producer id: {layout:?}");
        assert!(
            layout.producer_ids.iter().all(|id| *id >= 1000),
            "{layout:?}"
        );
    }
}

#[tokio::test]
async fn checksums_off_and_a_plain_producer_one_in_flight() {
    let (_scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved)
        .with_record_checksums(false)
        .with_idempotent(false)
        .with_max_in_flight(1);
    let (appended, index) = write(&cluster, config, &entries(0, 300)).await;
    let log = read_log(&cluster, TOPIC, 0).await;
    let layout = check_written(&log, &appended, &index, false);
    assert_eq!(
        layout.producer_ids.into_iter().collect::<Vec<_>>(),
        [-1],
        "no producer id"
    );
}

#[tokio::test]
async fn settings_are_checked() {
    let (_scripted, cluster) = scripted().await;
    for bad in [
        config(WriterMode::Clustered).with_max_in_flight(0),
        config(WriterMode::Clustered).with_max_in_flight(6),
        config(WriterMode::Clustered)
            .with_max_in_flight(2)
            .with_idempotent(false),
    ] {
        let writer = WalWriter::new(Arc::clone(&cluster), bad);
        let err = writer
            .append(WalEntry::new(1, "x"))
            .await
            .expect_err("refused");
        // Named: a server runs many writers.
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("max_in_flight")
                && m.contains("topic \"wal\" partition 0")),
            "{err}"
        );
        assert!(writer.close().await.is_err());
    }
}

/// A queue of `usize::MAX` entries ("no limit but the buffer's bytes")
/// panicked in `WalWriter::new` (tokio's channel holds at most
/// `Semaphore::MAX_PERMITS`); it now counts as that many, as 0 counts as 1.
#[tokio::test]
async fn a_queue_of_any_length_is_taken() {
    let (_scripted, cluster) = scripted().await;
    for queue in [0, usize::MAX] {
        let config = config(WriterMode::Clustered).with_queue(queue);
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
        appended.await.expect("written");
        writer.close().await.expect("closed");
    }
}

/// With `max_batch_bytes` 0 every entry is a full batch of its own: an
/// empty group counted as full already, so no group was ever marked full
/// and entries waited out the linger (forever under `Duration::MAX`,
/// until a flush) instead of going at once.
#[tokio::test]
async fn with_max_batch_bytes_0_each_entry_goes_at_once() {
    let (_scripted, cluster) = scripted().await;
    for mode in [WriterMode::Clustered, WriterMode::Interleaved] {
        let config = config(mode)
            .with_max_batch_bytes(0)
            .with_linger(Duration::MAX);
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let mut pending = Vec::new();
        for n in 0..10u64 {
            pending.push(writer.append(WalEntry::new(n % 3, "x")).await.unwrap());
        }
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            futures::future::try_join_all(pending),
        )
        .await;
        let Ok(written) = waited else {
            panic!("{mode:?}: the entries wait for the linger");
        };
        let written = written.unwrap();
        assert_eq!(written.len(), 10);
        writer.close().await.unwrap();
    }
}

/// An `append` cancelled while the writer's queue is full (a caller's
/// timeout, the writer task busy getting its producer id) kept the buffer
/// bytes it had taken: they were never given back, and once such appends
/// added up to the buffer, every later `append` waited forever.
#[tokio::test]
async fn a_cancelled_append_gives_its_buffer_bytes_back() {
    let (scripted, cluster) = scripted().await;
    // The writer task waits 2 s for its producer id, reading no entries.
    scripted.script(
        Fault::on(ApiKey::InitProducerId)
            .times(1)
            .then(FaultAction::Delay(Duration::from_secs(2))),
    );
    let config = WriterConfig::new(TOPIC, 0)
        .with_queue(1)
        .with_linger(Duration::ZERO);
    let buffer = config.buffer_bytes();
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = writer.append(WalEntry::new(1, "first")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Fills the queue.
    let second = writer.append(WalEntry::new(1, "second")).await.unwrap();
    let large = Bytes::from(vec![0u8; buffer * 2 / 3]);
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        writer.append(WalEntry::new(1, large.clone())),
    )
    .await;
    assert!(cancelled.is_err(), "the queue was full");
    first.await.unwrap();
    second.await.unwrap();
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        writer.append(WalEntry::new(1, large)).await?.await
    })
    .await
    .expect("room for it once the others are written");
    assert_eq!(again.unwrap(), 2);
    writer.close().await.unwrap();
}

/// A writer in a long-running server: its index kept every entry it ever
/// wrote, with no way to let go of those its regions had flushed. Truncated
/// below a checkpoint, it holds the rest and indexes on.
#[tokio::test]
async fn a_long_running_writer_lets_go_of_its_index_below_a_checkpoint() {
    let (_scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let first: Vec<_> = written(append_all(&writer, &entries(0, 90)).await);
    writer.truncate_index_below(60);
    let later: Vec<_> = written(append_all(&writer, &entries(90, 30)).await);
    let index = writer.close().await.unwrap();
    let kept: Vec<i64> = index
        .regions()
        .flat_map(|(_, r)| r.entries().iter().map(|e| e.offset))
        .collect();
    assert_eq!(kept.len(), 60, "{kept:?}");
    assert!(kept.iter().all(|&o| o >= 60), "{kept:?}");
    assert_eq!(index.source().first_offset, Some(60));
    assert_eq!(index.last_index(), Some(119));
    // Every region still listed, those with nothing left too.
    let regions = |w: &[(RegionId, Bytes, i64)]| {
        w.iter()
            .map(|(r, _, _)| *r)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(
        index.regions().map(|(r, _)| r).collect::<Vec<_>>(),
        regions(&first)
            .union(&regions(&later))
            .copied()
            .collect::<Vec<_>>()
    );
}

/// The runtime running a writer shuts down (a server stopping) while a
/// batch it sent waits for its answer, and the broker has appended it.
/// Its entry was told "the writer is closed", which says it was not
/// written (only `MaybeWritten` and `WrittenOffsetUnknown` say otherwise):
/// a caller appending it again wrote it twice. It now says it may have
/// been written; an entry never sent still says the writer is closed.
#[test]
fn a_writer_stopped_with_its_runtime_says_which_entries_may_be_written() {
    let brokers = tokio::runtime::Runtime::new().unwrap();
    let scripted = brokers.block_on(async {
        let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
        scripted.create_topic(TOPIC, 1).expect("topic");
        scripted
    });
    // Appended, never answered.
    scripted.script(
        Fault::on(ApiKey::Produce)
            .times(u32::MAX)
            .then(FaultAction::LoseResponse),
    );
    let server = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (writer, sent, unsent) = server.block_on(async {
        let config = ClusterConfig::new([scripted.bootstrap()]);
        let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
        let config = WriterConfig::new(TOPIC, 0)
            .with_max_in_flight(1)
            .with_linger(Duration::ZERO);
        let writer = WalWriter::new(cluster, config);
        let sent = writer.append(WalEntry::new(1, "in the log")).await.unwrap();
        while scripted.high_watermark(TOPIC, 0).unwrap() < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Behind the request in flight: never sent.
        let unsent = writer.append(WalEntry::new(2, "not sent")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        (writer, sent, unsent)
    });
    drop(server);
    let (sent, unsent) = brokers.block_on(async { (sent.await, unsent.await) });
    assert!(
        matches!(&sent, Err(Error::MaybeWritten { partition: 0, .. })),
        "{sent:?}"
    );
    let said = sent.unwrap_err().to_string();
    assert!(said.contains("runtime shut down"), "{said}");
    assert!(
        matches!(&unsent, Err(Error::WriterClosed { partition: 0, .. })),
        "{unsent:?}"
    );
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 1);
    drop(writer);
}

/// Writes 900 entries with a fault on one Produce in the middle; every
/// entry is written once, in order, with an exact index. Returns how many
/// Produce requests the broker received and how many batches the log has.
async fn lost_answer(
    action: FaultAction,
    duplicates: DuplicateAnswer,
    mode: WriterMode,
    in_flight: usize,
) -> (u64, usize) {
    let (produced, batches, _) = lost_answer_fetches(action, duplicates, mode, in_flight).await;
    (produced, batches)
}

/// [`lost_answer`], with the writer's Fetch requests by `max_wait_ms`.
async fn lost_answer_fetches(
    action: FaultAction,
    duplicates: DuplicateAnswer,
    mode: WriterMode,
    in_flight: usize,
) -> (u64, usize, BTreeMap<i32, u64>) {
    let (scripted, cluster) = scripted().await;
    scripted.set_duplicate_answer(duplicates);
    let writer = WalWriter::new(
        Arc::clone(&cluster),
        config(mode).with_max_in_flight(in_flight),
    );
    let first = entries(0, 300);
    let mut appended = written(append_all(&writer, &first).await);
    // The fault hits the first Produce of the next entries, with more
    // batches behind it.
    scripted.script(Fault::on(ApiKey::Produce).then(action.clone()));
    let rest = entries(300, 600);
    appended.extend(written(append_all(&writer, &rest).await));
    let index = writer.close().await.expect("closed");
    assert!(scripted.pending_faults().is_empty(), "the fault fired");
    let fetch_waits = scripted.stats(1).unwrap().fetch_max_waits;
    let log = read_log(&cluster, TOPIC, 0).await;
    let layout = check_written(&log, &appended, &index, true);
    assert_eq!(
        layout.producer_ids.len(),
        1,
        "{action:?}: sent again under the same producer id"
    );
    let produced = scripted.stats(1).unwrap().requests_of(ApiKey::Produce);
    (produced, log.len(), fetch_waits)
}

#[tokio::test]
async fn a_lost_answer_is_sent_again_not_duplicated() {
    for mode in [WriterMode::Clustered, WriterMode::Interleaved] {
        for duplicates in [
            DuplicateAnswer::OriginalOffset,
            DuplicateAnswer::DuplicateSequenceNumber,
            DuplicateAnswer::NoOffset,
        ] {
            let (produced, batches, fetch_waits) =
                lost_answer_fetches(FaultAction::CutBeforeResponse, duplicates, mode, 5).await;
            assert!(
                produced > batches as u64,
                "{mode:?} {duplicates:?}: {produced} Produce requests for {batches} batches"
            );
            // Finding a duplicate acknowledged without its offset reads the
            // log, and lets the broker wait for nothing (Tansu 0.6 sleeps
            // out any wait asked for, even with the records at hand).
            let located = duplicates != DuplicateAnswer::OriginalOffset;
            assert_eq!(
                (located, fetch_waits.keys().all(|&ms| ms == 0)),
                (!fetch_waits.is_empty(), true),
                "{mode:?} {duplicates:?}: Fetch requests by max_wait_ms {fetch_waits:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_timed_out_request_is_sent_again_with_those_behind_it() {
    // Five in flight: the batches sent behind the lost one were answered,
    // but go again with it (their answers are dropped with the
    // connection): the broker recognises every one.
    let (produced, batches) = lost_answer(
        FaultAction::LoseResponse,
        DuplicateAnswer::OriginalOffset,
        WriterMode::Clustered,
        5,
    )
    .await;
    assert!(
        produced >= batches as u64 + 2,
        "several in flight, sent again: {produced} Produce requests for {batches} batches"
    );
    // One in flight: only the lost one goes again.
    let (produced, batches) = lost_answer(
        FaultAction::LoseResponse,
        DuplicateAnswer::OriginalOffset,
        WriterMode::Clustered,
        1,
    )
    .await;
    assert_eq!(produced, batches as u64 + 1);
}

/// A batch refused for good (`INVALID_RECORD`; a batch refused
/// `MESSAGE_TOO_LARGE` is split instead, see
/// `a_batch_larger_than_the_topic_takes_is_split_and_only_an_entry_too_large_alone_fails`)
/// fails alone; the batches behind it, refused for their sequence, follow
/// under the same producer id, their sequence taken back to the refused
/// batch's (they once went under a new one).
#[tokio::test]
async fn a_refused_batch_fails_alone_and_the_rest_follow_under_the_same_producer_id() {
    let (scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let mut appended = written(append_all(&writer, &entries(0, 300)).await);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::InvalidRecord.code(),
    )));
    let results = append_all(&writer, &entries(300, 600)).await;
    let mut failed = 0;
    for (region, payload, result) in results {
        match result {
            Ok(offset) => appended.push((region, payload, offset)),
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("INVALID_RECORD"), "{e}");
            }
        }
    }
    let index = writer.close().await.expect("closed");
    assert!(failed > 0, "the refused batch's entries fail");
    // The refused batch is not in the log; everything else is, once.
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(
        layout.producer_ids.len(),
        1,
        "the same producer id: {layout:?}"
    );
}

#[tokio::test]
async fn an_answer_past_the_largest_offset_fails_its_batch_and_the_writer_goes_on() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    // In Produce v9's answer (the scripted broker's newest version), the
    // first partition's base offset is at byte 21 of the frame for a
    // three-letter topic: length 4, correlation id 4, tagged fields 1,
    // topics 1, name 1 + 3, partitions 1, index 4, error code 2.
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 21,
        bytes: (i64::MAX - 1).to_be_bytes().to_vec(),
    }));
    let results = append_all(&writer, &entries(0, 3)).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.2.as_ref().err()).collect();
    assert!(!failed.is_empty(), "the batch so answered fails");
    for e in failed {
        assert!(e.to_string().contains("past the largest offset"), "{e}");
    }
    // The writer goes on, and indexes only what it could place.
    let ok = results.iter().filter(|r| r.2.is_ok()).count();
    let more = written(append_all(&writer, &entries(3, 20)).await);
    let index = writer.close().await.expect("closed");
    assert!(more.windows(2).all(|w| w[0].2 < w[1].2), "{more:?}");
    assert_eq!(index.len(), ok + more.len());
}

/// A broker's answer the client cannot decode (a broker's bug, a stream
/// garbled past the frame) does not say whether the batch was written: the
/// writer looks for it in the log, so that an entry that was written is
/// neither reported failed (which a caller would write again) nor lost.
#[tokio::test]
async fn a_batch_whose_answer_cannot_be_decoded_is_looked_for_in_the_log() {
    for in_flight in [1, 5] {
        let (scripted, cluster) = scripted().await;
        let config = config(WriterMode::Clustered).with_max_in_flight(in_flight);
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let mut appended = written(append_all(&writer, &entries(0, 30)).await);
        // In Produce v9's answer the topics' count (a compact array
        // length) is byte 9 of the frame: claiming 126 topics, the answer
        // ends long before them.
        scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
            at: 9,
            bytes: vec![0x7f],
        }));
        appended.extend(written(append_all(&writer, &entries(30, 90)).await));
        assert!(scripted.pending_faults().is_empty(), "the fault was met");
        let index = writer.close().await.expect("closed");
        // Every entry once, at the offset the writer answered, indexed.
        check(&cluster, &appended, &index).await;
    }
}

/// ... and a batch so answered that is not in the log was not written: its
/// entries fail (a caller may write them again), saying so, and the
/// writer goes on under a new producer id.
#[tokio::test]
async fn a_batch_whose_answer_cannot_be_decoded_and_is_not_in_the_log_fails() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Clustered).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = written(append_all(&writer, &entries(0, 30)).await);
    // The broker forgets the producer, so it refuses the next batch
    // (`UNKNOWN_PRODUCER_ID`), in an answer that cannot be decoded.
    scripted.expire_producers(TOPIC, 0).expect("expired");
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 9,
        bytes: vec![0x7f],
    }));
    let mut failed = 0;
    for (region, payload, result) in append_all(&writer, &entries(30, 90)).await {
        match result {
            Ok(offset) => appended.push((region, payload, offset)),
            Err(e) => {
                failed += 1;
                let e = e.to_string();
                assert!(
                    e.contains("cannot be decoded") && e.contains("no batch"),
                    "{e}"
                );
            }
        }
    }
    assert!(failed > 0, "the batch so answered fails");
    let index = writer.close().await.expect("closed");
    // The failed entries are not in the log; every other entry is, once.
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(
        layout.producer_ids.len(),
        2,
        "a new producer id: {layout:?}"
    );
}

#[tokio::test]
async fn without_idempotence_a_lost_answer_fails_its_entries_and_is_not_sent_again() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved)
        .with_idempotent(false)
        .with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = written(append_all(&writer, &entries(0, 100)).await);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    let results = append_all(&writer, &entries(100, 200)).await;
    let index = writer.close().await.expect("closed");
    let failed: Vec<_> = results.iter().filter(|r| r.2.is_err()).collect();
    assert!(!failed.is_empty(), "the batch whose answer was lost fails");
    // Its error says it may be in the log (it is): appended again, it would
    // be there twice.
    for (_, _, e) in &failed {
        let e = e.as_ref().unwrap_err();
        assert!(matches!(e, Error::MaybeWritten { .. }), "{e}");
    }
    // The broker appended the batch once; the writer did not send it again
    // and did not index it.
    let log = read_log(&cluster, TOPIC, 0).await;
    let records: usize = log.iter().map(|b| b.records.len()).sum();
    assert_eq!(records, 300, "every entry once, the lost batch included");
    let ok = results.iter().filter(|r| r.2.is_ok()).count();
    assert_eq!(
        index.len(),
        first.len() + ok,
        "failed entries are not indexed"
    );
    assert_eq!(
        scripted.stats(1).unwrap().requests_of(ApiKey::Produce),
        log.len() as u64,
        "one Produce per batch"
    );
}

#[tokio::test]
async fn a_queued_produce_is_on_the_connection_even_with_the_task_budget_spent() {
    // The writer keeps its requests in order by queueing each frame before
    // the next: `produce_queued` must queue it whatever the calling task's
    // cooperative budget (spent under load, when `recv` keeps finding
    // entries), or a later batch could overtake it.
    let (_scripted, cluster) = scripted().await;
    let (connection, _) = cluster.leader_connection(TOPIC, 0).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for n in 0..100_000 {
        tx.send(n).unwrap();
    }
    tokio::task::yield_now().await;
    // Each `recv` that finds an entry spends budget; once spent, `recv`
    // says "not yet" with entries waiting.
    let mut spent = false;
    for _ in 0..100_000 {
        if futures::poll!(std::pin::pin!(rx.recv())).is_pending() {
            spent = true;
            break;
        }
    }
    assert!(spent, "the task's budget is spent");
    let before = connection.stats().requests;
    let records = [walfetch::codec::NewRecord::value(
        0,
        Bytes::from_static(b"entry"),
    )];
    let batch = walfetch::codec::BatchBuilder::new(0)
        .encode(&records)
        .unwrap()
        .bytes;
    let answer = cluster
        .produce_queued(Arc::clone(&connection), TOPIC, 0, batch)
        .await;
    assert_eq!(
        connection.stats().requests,
        before + 1,
        "the frame is queued when produce_queued returns"
    );
    assert_eq!(answer.await.unwrap(), 0);
}

/// While the pipeline is full (one request in flight, its answer held for
/// half a second), a busy region's entries keep collecting into full
/// batches instead of going as one small batch per linger, and a quiet
/// region's entry goes out by its age: before the busy region's entries
/// appended after it. Paused clock: the sleeps are exact.
#[tokio::test(start_paused = true)]
async fn under_load_batches_fill_up_and_a_quiet_region_goes_by_its_age() {
    let (scripted, cluster) = scripted().await;
    let payload = |n: usize| Bytes::from(format!("{n:0>100}"));
    let size = WalEntry::new(1, payload(0)).batch_bytes()
        + walfetch::codec::RECORD_CHECKSUM_HEADER.len()
        + 6;
    let config = WriterConfig::new(TOPIC, 0)
        .with_max_in_flight(1)
        .with_linger(Duration::from_millis(5))
        .with_max_batch_bytes(6 * size);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(500))));
    let mut pending = vec![(
        9,
        payload(0),
        writer.append(WalEntry::new(9, payload(0))).await.unwrap(),
    )];
    // The first batch (region 9) is sent after its linger and held; then
    // 20 entries of region 1, one every 5 ms, and one of region 2 after
    // the ninth.
    for n in 1..=20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let appended = writer.append(WalEntry::new(1, payload(n))).await.unwrap();
        pending.push((1, payload(n), appended));
        if n == 9 {
            let appended = writer.append(WalEntry::new(2, payload(100))).await.unwrap();
            pending.push((2, payload(100), appended));
        }
    }
    let mut appended = Vec::new();
    for (region, payload, offset) in pending {
        appended.push((region, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    assert!(scripted.pending_faults().is_empty(), "the answer was held");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &appended, &index, true);
    let regions: Vec<Vec<RegionId>> = log
        .iter()
        .map(|b| {
            b.records
                .iter()
                .map(|r| RegionId::from_be_bytes(r.key.as_deref().unwrap().try_into().unwrap()))
                .collect()
        })
        .collect();
    // Region 1: 20 entries in batches of 6, the fewest possible.
    let busy: Vec<usize> = regions.iter().filter(|b| b[0] == 1).map(Vec::len).collect();
    assert_eq!(busy, [6, 6, 6, 2], "batches grow under load: {regions:?}");
    // Region 2's entry goes before region 1's 13th (appended after it),
    // after the batches holding region 1's entries older than it.
    let at = |value: &Bytes| {
        log.iter()
            .position(|b| b.records.iter().any(|r| r.value.as_ref() == Some(value)))
            .unwrap()
    };
    assert!(at(&payload(100)) < at(&payload(13)), "{regions:?}");
    assert!(at(&payload(100)) > at(&payload(9)), "{regions:?}");
}

/// An entry's linger runs from its `append`, not from when the writer task
/// got to it: an entry the task takes 3 ms late is sent by its own linger
/// (5 ms from the append), not 5 ms after the task took it. Paused clock.
#[tokio::test(start_paused = true)]
async fn the_linger_runs_from_the_append_not_from_when_the_writer_took_the_entry() {
    let (_scripted, cluster) = scripted().await;
    let linger = Duration::from_millis(5);
    let config = WriterConfig::new(TOPIC, 0).with_linger(linger);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let payload = Bytes::from_static(b"late");
    let appended_at = tokio::time::Instant::now();
    let appended = writer
        .append(WalEntry::new(7, payload.clone()))
        .await
        .unwrap();
    // The clock moves on before the writer task runs: it takes the entry
    // 3 ms after the append.
    tokio::time::advance(Duration::from_millis(3)).await;
    let offset = appended.await.expect("written");
    let waited = appended_at.elapsed();
    assert!(
        waited <= linger,
        "the entry waited {waited:?}, more than its {linger:?} linger"
    );
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &[(7, payload, offset)], &index, true);
}

/// A record's timestamp is when the writer took its entry, as a Kafka
/// producer stamps a record when it is sent, not when its batch was
/// formed: entries of one batch appended 60 ms apart are 60 ms apart in
/// the log.
#[tokio::test]
async fn records_are_stamped_when_taken_not_when_their_batch_is_formed() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0)
        .with_compression(Compression::Lz4)
        .with_linger(Duration::from_secs(5));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = Vec::new();
    let mut pending = Vec::new();
    for i in 0..3u8 {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        let payload = Bytes::from(vec![i; 100]);
        pending.push((
            payload.clone(),
            writer.append(WalEntry::new(4, payload)).await.unwrap(),
        ));
    }
    writer.flush().await.unwrap();
    for (payload, offset) in pending {
        appended.push((4, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    assert_eq!(log.len(), 1, "one batch: {log:?}");
    check_written(&log, &appended, &index, true);
    let stamps: Vec<i64> = log[0].records.iter().map(|r| r.timestamp).collect();
    for pair in stamps.windows(2) {
        assert!(pair[1] - pair[0] >= 50, "{stamps:?}");
    }
    assert_eq!(log[0].header.base_timestamp, stamps[0]);
    assert_eq!(log[0].header.max_timestamp, stamps[2]);
}

/// Entries already queued when their group falls due go into its batch:
/// ten entries of one region, appended before the writer task ran and
/// past their linger by the time it does, make one batch, not a batch of
/// the first entry with the rest behind it.
#[tokio::test(start_paused = true)]
async fn entries_queued_when_their_group_falls_due_go_into_its_batch() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(5));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut pending = Vec::new();
    for i in 0..10u8 {
        let payload = Bytes::from(vec![i; 64]);
        pending.push((
            payload.clone(),
            writer.append(WalEntry::new(3, payload)).await.unwrap(),
        ));
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    let mut appended = Vec::new();
    for (payload, offset) in pending {
        appended.push((3, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &appended, &index, true);
    assert_eq!(log.len(), 1, "{log:?}");
}

/// A writer of `config` whose first entry is written: its producer id and
/// the partition's leader are known.
async fn writer_with_a_first_entry(cluster: &Arc<Cluster>, config: WriterConfig) -> WalWriter {
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let first = writer.append(WalEntry::new(1, "first")).await.unwrap();
    writer.flush().await.unwrap();
    first.await.unwrap();
    writer
}

/// Appends one entry to each of regions 1 to 6: six batches, clustered.
async fn one_entry_each_of_six_regions(writer: &WalWriter) -> Vec<Appended> {
    let mut pending = Vec::new();
    for region in 1..=6 {
        pending.push(writer.append(WalEntry::new(region, "x")).await.unwrap());
    }
    pending
}

/// Makes every Metadata answer say the partition has no leader, after the
/// cluster forgot what it knew: the writer cannot find where to send.
fn lose_the_leader(scripted: &ScriptedCluster, cluster: &Cluster) {
    cluster.invalidate(TOPIC);
    scripted.script(
        Fault::on(ApiKey::Metadata)
            .times(100_000)
            .then(FaultAction::TopicError(
                ResponseError::LeaderNotAvailable.code(),
            )),
    );
}

/// The leader cannot be found for longer than the retry deadline while six
/// batches wait and a flush waits for them: the oldest fails, and once the
/// leader is back the rest go. They once waited for an append to wake the
/// writer, and the flush (and `close`, which flushes) never returned.
#[tokio::test]
async fn after_the_leader_is_missing_past_the_deadline_the_rest_still_go() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(1)).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    lose_the_leader(&scripted, &cluster);
    let pending = one_entry_each_of_six_regions(&writer).await;
    let mut pending = pending.into_iter();
    let oldest = pending.next().unwrap();
    {
        let flush = writer.flush();
        tokio::pin!(flush);
        tokio::select! {
            r = &mut flush => panic!("flushed during the outage: {r:?}"),
            r = oldest => assert!(r.is_err(), "the oldest batch fails: {r:?}"),
        }
        scripted.clear_faults();
        tokio::time::timeout(Duration::from_secs(10), &mut flush)
            .await
            .expect("the flush returns once the leader is back")
            .unwrap();
    }
    // Each batch's deadline ran from when the writer was first held up:
    // those that outlived it failed with the oldest, the rest are written.
    for p in pending {
        if let Ok(offset) = p.await {
            assert!(offset >= 1);
        }
    }
    writer.close().await.unwrap();
}

/// A batch encoded ahead (its sequence numbers given out) that fails
/// without ever being sent, the leader missing past the deadline: the next
/// batch once went out under the same producer with a gap in its sequence,
/// and the broker refused it (`OUT_OF_ORDER_SEQUENCE_NUMBER`). It goes
/// under a new producer id now.
#[tokio::test]
async fn a_batch_encoded_ahead_that_never_left_leaves_no_sequence_gap() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(1)).await;
    let config = WriterConfig::new(TOPIC, 0)
        .with_max_in_flight(1)
        .with_max_batch_bytes(2 << 10)
        .with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // Batch A is held by the broker for 500 ms; behind it more than a full
    // batch of region 1 gathers, and the first full one is encoded ahead.
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(500))));
    let a = writer.append(WalEntry::new(1, "a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut rest = Vec::new();
    for n in 0..20 {
        let payload = Bytes::from(format!("{n:0>100}"));
        rest.push(writer.append(WalEntry::new(1, payload)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    lose_the_leader(&scripted, &cluster);
    a.await.expect("A is written");
    let mut rest = rest.into_iter();
    let encoded_ahead = rest.next().unwrap().await;
    assert!(encoded_ahead.is_err(), "{encoded_ahead:?}");
    scripted.clear_faults();
    for r in rest {
        if let Err(e) = r.await {
            assert!(
                !e.to_string().contains("OUT_OF_ORDER_SEQUENCE_NUMBER"),
                "{e}"
            );
        }
    }
    writer.close().await.unwrap();
}

/// A new writer on a log whose start is past 0 (retention), its first
/// batch's answer lost and the batch answered as a duplicate without its
/// offset (`DUPLICATE_SEQUENCE_NUMBER`, as Kafka 0.11 and Tansu 0.6 do):
/// the writer once looked for it from offset 0, got
/// `OFFSET_OUT_OF_RANGE`, and failed an entry that was written.
#[tokio::test]
async fn a_duplicate_is_looked_for_past_the_log_end_when_the_producer_began() {
    use walfetch::codec::{BatchBuilder, NewRecord};
    let (scripted, cluster) = scripted().await;
    for i in 0..10 {
        let batch = BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, format!("old {i}"))])
            .unwrap()
            .bytes;
        scripted.append(TOPIC, 0, batch).unwrap();
    }
    scripted.advance_log_start(TOPIC, 0, 8).unwrap();
    scripted.set_duplicate_answer(DuplicateAnswer::DuplicateSequenceNumber);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    let appended = writer.append(WalEntry::new(1, "new")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(appended.await.unwrap(), 10);
    assert_eq!(
        scripted.high_watermark(TOPIC, 0).unwrap(),
        11,
        "written once"
    );
    writer.close().await.unwrap();
}

/// A linger of `Duration::MAX` (send only when full or flushed) once
/// overflowed working out when a group is due, and the writer task
/// panicked: every append, flush and close then failed.
#[tokio::test]
async fn a_linger_of_duration_max_sends_on_flush() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(appended.await.unwrap(), 0);
    writer.close().await.unwrap();
}

/// The broker forgets the writer's producer while it is idle (Kafka does
/// after `producer.id.expiration.ms`, a day by default): the next batch,
/// its sequence past 0, is refused with `UNKNOWN_PRODUCER_ID`. It was not
/// written, so it goes again under a new producer id instead of failing
/// its entries, and the log holds each entry once.
#[tokio::test]
async fn after_the_broker_forgets_an_idle_producer_the_next_batch_is_written() {
    let (scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let first = writer.append(WalEntry::new(1, "before")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(first.await.unwrap(), 0);
    scripted.expire_producers(TOPIC, 0).unwrap();
    let mut after = Vec::new();
    for region in 1..=3 {
        after.push(writer.append(WalEntry::new(region, "after")).await.unwrap());
    }
    writer.flush().await.unwrap();
    let mut offsets = Vec::new();
    for a in after {
        offsets.push(a.await.unwrap());
    }
    offsets.sort_unstable();
    assert_eq!(offsets, [1, 2, 3]);
    assert_eq!(
        scripted.high_watermark(TOPIC, 0).unwrap(),
        4,
        "each entry once"
    );
    writer.close().await.unwrap();
}

/// The leader missing for good, six batches waiting and a flush: they
/// were held up together, so their deadlines run from then and they fail
/// together, not one deadline after another (each batch's once ran from
/// when the one before it gave up).
#[tokio::test]
async fn batches_held_up_together_fail_together() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(1)).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    lose_the_leader(&scripted, &cluster);
    let pending = one_entry_each_of_six_regions(&writer).await;
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), writer.flush())
        .await
        .expect("the flush returns")
        .unwrap();
    let took = started.elapsed();
    for p in pending {
        assert!(p.await.is_err());
    }
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// While the leader cannot be found, the writer looks it up again after a
/// backoff that grows (50, 100, 200, 400 ms …, jittered), as it does
/// between sends: it once asked every 25–50 ms for the whole deadline.
#[tokio::test]
async fn a_missing_leader_is_looked_up_with_a_growing_backoff() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(2)).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    lose_the_leader(&scripted, &cluster);
    scripted.reset_stats();
    let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
    writer.flush().await.unwrap();
    assert!(appended.await.is_err(), "the leader never came back");
    let lookups = scripted.stats(1).unwrap().requests_of(ApiKey::Metadata);
    // Over 2 s: 40–80 lookups at a fixed 25–50 ms; a handful growing.
    assert!(lookups <= 15, "{lookups} Metadata requests");
}

/// A writer whose batches go only when full or flushed (a linger of
/// `Duration::MAX`, one in flight), given one 64 KiB entry for each of 520
/// regions: 33 MiB, past `BUFFER_BYTES`, none of their groups near
/// `max_batch_bytes`. The entries' acknowledgements.
async fn a_buffer_full_of_lingering_groups(cluster: &Arc<Cluster>) -> (WalWriter, Vec<Appended>) {
    let config = WriterConfig::new(TOPIC, 0)
        .with_linger(Duration::MAX)
        .with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let payload = Bytes::from(vec![7u8; 64 << 10]);
    let mut pending = Vec::new();
    let fill = async {
        for region in 0..520u64 {
            let entry = WalEntry::new(region, payload.clone());
            pending.push(writer.append(entry).await.expect("queued"));
        }
    };
    tokio::time::timeout(Duration::from_secs(20), fill)
        .await
        .expect("appends go on once the buffer is full");
    (writer, pending)
}

/// With the buffer full of groups that are neither full nor due (a linger
/// of `Duration::MAX`), the writer stopped taking from its queue: a flush
/// behind the entries was never read, and `flush` and `close` hung. At the
/// cap the oldest group now goes.
#[tokio::test]
async fn a_buffer_full_of_lingering_groups_is_sent_and_a_flush_returns() {
    let (_scripted, cluster) = scripted().await;
    let (writer, pending) = a_buffer_full_of_lingering_groups(&cluster).await;
    tokio::time::timeout(Duration::from_secs(20), writer.flush())
        .await
        .expect("the flush returns")
        .expect("flushed");
    for p in pending {
        p.await.expect("written");
    }
    writer.close().await.expect("closed");
}

/// ... and a writer dropped without `close` with its buffer so full still
/// writes what it was given, then ends.
#[tokio::test]
async fn a_dropped_writer_with_a_full_buffer_still_writes_its_entries() {
    let (scripted, cluster) = scripted().await;
    let (writer, pending) = a_buffer_full_of_lingering_groups(&cluster).await;
    drop(writer);
    let results = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(pending))
        .await
        .expect("the dropped writer's entries are answered");
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 520);
}

/// `append` waits once the writer holds `buffer_bytes` of entries (the
/// Java producer's `buffer.memory`): it used to wait only when its queue
/// held 16,384 entries, whatever their size (16 GiB of 1 MiB entries).
#[tokio::test]
async fn append_waits_once_the_buffer_bytes_are_held() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(60)).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let buffer = config.buffer_bytes();
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // Nothing can be sent: entries stay held.
    lose_the_leader(&scripted, &cluster);
    let payload = Bytes::from(vec![1u8; 1 << 20]);
    let mut accepted = 0usize;
    let mut pending = Vec::new();
    for n in 0..2_000u64 {
        let entry = WalEntry::new(n % 8, payload.clone());
        match tokio::time::timeout(Duration::from_millis(200), writer.append(entry)).await {
            Ok(appended) => {
                pending.push(appended.expect("queued"));
                accepted += 1;
            }
            Err(_) => break,
        }
    }
    assert_eq!(
        accepted,
        buffer / ((1 << 20) + 64),
        "append waits at {buffer} bytes held"
    );
    // An entry larger than the buffer is refused, not waited for.
    let huge = WalEntry::new(1, Bytes::from(vec![0u8; buffer + 1]));
    let refused = writer.append(huge).await.expect_err("refused");
    assert!(refused.to_string().contains("buffer_bytes"), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("topic \"wal\" partition 0: an entry of region 1"),
        "{refused}"
    );
}

/// A batch's answer is lost (the request times out) after the broker
/// appended it, and the broker then forgets the producer (a restart
/// without its producer snapshot, an expired producer): the batch sent
/// again is refused `UNKNOWN_PRODUCER_ID`. That refusal says nothing of the
/// first send, which may be in the log: the writer once sent the batch
/// under a new producer id at once, and the entry was written twice. It
/// now looks for the batch in the log under its old stamp first, and
/// finds it written.
#[tokio::test]
async fn a_batch_whose_answer_was_lost_is_looked_for_before_it_goes_under_a_new_producer_id() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let once = writer
        .append(WalEntry::new(2, "written once"))
        .await
        .unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The broker loses the producer's state before the batch goes again.
    scripted.expire_producers(TOPIC, 0).unwrap();
    let offset = once.await;
    writer.close().await.unwrap();
    let log = read_log(&cluster, TOPIC, 0).await;
    let copies = log
        .iter()
        .flat_map(|b| &b.records)
        .filter(|r| r.value.as_deref() == Some(&b"written once"[..]))
        .count();
    assert_eq!(copies, 1, "the entry is in the log {copies} times");
    assert_eq!(
        offset.unwrap(),
        1,
        "acknowledged where the first send put it"
    );
}

/// Five in flight, a broker that answers a duplicate with
/// `DUPLICATE_SEQUENCE_NUMBER` (Kafka 0.11, Tansu), and a principal that
/// may Write the topic but not Read it (its Fetch refused
/// `TOPIC_AUTHORIZATION_FAILED`, a usual producer ACL). Batch 1 is appended
/// and its answer lost; sent again, the broker says it has it, but the
/// writer cannot read the log to find its offset. Its entry once failed
/// with the Fetch's error (as if not written) and the writer took a new
/// producer id; batch 2, its answer lost too, then went under the new id
/// and was written twice. Now batch 1's entry fails saying it was written
/// at an offset unknown, the producer goes on, and no entry is in the log
/// twice or reported failed while in the log without saying so.
#[tokio::test]
async fn a_duplicate_whose_offset_cannot_be_read_is_reported_written_and_nothing_goes_twice() {
    let (scripted, cluster) = scripted().await;
    scripted.set_duplicate_answer(DuplicateAnswer::DuplicateSequenceNumber);
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    // Produce 1 appended, the connection cut (2 to 5 never read). Sent
    // again: 1 is answered (a duplicate), 2 appended and the connection
    // cut.
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::ZERO)));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    scripted.script(Fault::on(ApiKey::Fetch).then(FaultAction::PartitionError(
        ResponseError::TopicAuthorizationFailed.code(),
    )));
    let mut pending = Vec::new();
    for region in 1..=6 as RegionId {
        let payload = Bytes::from(format!("the entry of region {region}"));
        let appended = writer
            .append(WalEntry::new(region, payload.clone()))
            .await
            .unwrap();
        pending.push((payload, appended));
    }
    writer.flush().await.unwrap();
    let mut results = Vec::new();
    for (payload, appended) in pending {
        results.push((payload, appended.await));
    }
    writer.close().await.unwrap();
    assert!(scripted.pending_faults().is_empty(), "every fault fired");
    let log = read_log(&cluster, TOPIC, 0).await;
    let mut copies: BTreeMap<Bytes, usize> = BTreeMap::new();
    for r in log.iter().flat_map(|b| &b.records) {
        *copies.entry(r.value.clone().unwrap()).or_default() += 1;
    }
    let report: Vec<String> = results
        .iter()
        .map(|(p, r)| {
            let n = copies.get(p).copied().unwrap_or(0);
            let said = r.as_ref().map_err(ToString::to_string);
            format!("{p:?}: {n} in the log, the writer said {said:?}")
        })
        .collect();
    let report = report.join("\n");
    for (payload, result) in &results {
        let n = copies.get(payload).copied().unwrap_or(0);
        assert!(n <= 1, "written {n} times:\n{report}");
        match result {
            Ok(offset) => {
                assert_eq!(n, 1, "{report}");
                let at = log
                    .iter()
                    .flat_map(|b| &b.records)
                    .find(|r| r.offset == *offset);
                assert_eq!(at.and_then(|r| r.value.as_ref()), Some(payload), "{report}");
            }
            Err(Error::WrittenOffsetUnknown { .. } | Error::MaybeWritten { .. }) => {}
            Err(_) => assert_eq!(n, 0, "reported failed but written:\n{report}"),
        }
    }
    assert!(
        matches!(results[0].1, Err(Error::WrittenOffsetUnknown { .. })),
        "{report}"
    );
    assert!(results[1..].iter().all(|(_, r)| r.is_ok()), "{report}");
}

/// With the cluster's default timeouts (`request_timeout` 30 s and
/// `produce_timeout` 30 s: a Produce's answer is waited for 60 s) and
/// retry deadline (30 s), a Produce whose answer was lost was never sent
/// again, although the module docs promise it: when it timed out, the
/// batch was past its deadline and failed at once, the broker having
/// appended it. A sent batch's deadline now has one answer's time on top.
/// When every answer is lost, the entry fails saying it may have been
/// written. Paused clock: the minutes pass at once.
#[tokio::test(start_paused = true)]
async fn with_the_default_timeouts_a_produce_whose_answer_was_lost_is_sent_again() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let config = ClusterConfig::new([scripted.bootstrap()]);
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let lost = writer
        .append(WalEntry::new(2, "lost answer"))
        .await
        .unwrap();
    assert_eq!(lost.await.unwrap(), 1, "sent again, found written at 1");
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 2, "once");
    // No answer ever: the entry fails after its second send, saying it
    // may be in the log (it is).
    scripted.script(
        Fault::on(ApiKey::Produce)
            .times(10)
            .then(FaultAction::LoseResponse),
    );
    scripted.reset_stats();
    let lost = writer.append(WalEntry::new(3, "never answered")).await;
    let error = lost.unwrap().await.unwrap_err();
    assert!(matches!(error, Error::MaybeWritten { .. }), "{error}");
    assert!(
        error.to_string().contains("may have been written"),
        "{error}"
    );
    let produced = scripted.stats(1).unwrap().requests_of(ApiKey::Produce);
    assert_eq!(produced, 2, "sent again once: {error}");
    scripted.clear_faults();
    writer.close().await.unwrap();
}

/// A throttled Produce answer (KIP-219, `throttle_time_ms` 3 s) while five
/// requests are in flight: the other four were written and answered at
/// once, but the writer task waited out the throttle inside its next send
/// (getting the leader's connection) and read no answer meanwhile. Now
/// only its sends wait; the entries already written are acknowledged at
/// once. Paused clock: the throttle's wait would show as 3 s.
#[tokio::test(start_paused = true)]
async fn a_throttled_answer_does_not_hold_back_the_answers_behind_it() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::ThrottleTime(Duration::from_secs(3))));
    let pending = one_entry_each_of_six_regions(&writer).await;
    let started = tokio::time::Instant::now();
    let mut pending = pending.into_iter();
    let first_five: Vec<Appended> = pending.by_ref().take(5).collect();
    {
        let flush = writer.flush();
        tokio::pin!(flush);
        let offsets = tokio::select! {
            _ = &mut flush => panic!("flushed before the throttle ended"),
            offsets = futures::future::join_all(first_five) => offsets,
        };
        let took = started.elapsed();
        assert!(offsets.iter().all(Result::is_ok), "{offsets:?}");
        assert!(
            took < Duration::from_secs(1),
            "the batches sent before the throttle were acknowledged after {took:?}"
        );
        // The sixth waits out the throttle, then goes.
        flush.await.unwrap();
    }
    assert!(started.elapsed() >= Duration::from_secs(3));
    pending.next().unwrap().await.unwrap();
    writer.close().await.unwrap();
}

/// One batch refused for good (`MESSAGE_TOO_LARGE`) with four in flight
/// behind it, and the next answered `NOT_LEADER_OR_FOLLOWER` (a leader
/// election under way): certainly not written, and retriable. Its entry
/// once failed; it now goes again under the new producer id with the
/// batches refused for their sequence behind the refused one.
#[tokio::test]
async fn a_batch_behind_a_refused_one_refused_for_a_passing_reason_goes_again() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::MessageTooLarge.code(),
    )));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::NotLeaderOrFollower.code(),
    )));
    let mut pending = Vec::new();
    for region in 1..=5 as RegionId {
        pending.push(writer.append(WalEntry::new(region, "x")).await.unwrap());
    }
    writer.flush().await.unwrap();
    let mut results = Vec::new();
    for p in pending {
        results.push(p.await.map_err(|e| e.to_string()));
    }
    writer.close().await.unwrap();
    assert!(
        results[0]
            .as_ref()
            .is_err_and(|e| e.contains("MESSAGE_TOO_LARGE")),
        "{results:?}"
    );
    for (n, r) in results.iter().enumerate().skip(1) {
        assert!(r.is_ok(), "entry {n} not written: {r:?}");
    }
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 5, "each once");
}

/// A broker answering a batch with a base offset at or below one it gave
/// an earlier batch (reusing offsets): the index cannot take the entries
/// (a region's offsets only grow), and the writer once logged that and
/// acknowledged them all the same, so the index it returned lacked entries
/// below its `last_index`, which a replay by it would skip. The batch now
/// fails, saying it may be in the log, and the writer goes on.
#[tokio::test]
async fn an_answer_at_an_offset_already_given_fails_its_batch_unindexed() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = written(append_all(&writer, &entries(0, 3)).await);
    // Produce v9's first base offset is at byte 21 of the frame (see
    // `an_answer_past_the_largest_offset_fails_its_batch_and_the_writer_goes_on`).
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 21,
        bytes: 0i64.to_be_bytes().to_vec(),
    }));
    let results = append_all(&writer, &entries(3, 3)).await;
    for (_, _, r) in &results {
        let e = r.as_ref().expect_err("the batch so answered fails");
        assert!(matches!(e, Error::MaybeWritten { .. }), "{e}");
        assert!(e.to_string().contains("at or below offset 2"), "{e}");
    }
    let more = written(append_all(&writer, &entries(6, 20)).await);
    let index = writer.close().await.expect("closed");
    assert_eq!(index.len(), first.len() + more.len());
    for (region, _, offset) in first.iter().chain(&more) {
        assert!(
            index
                .region(*region)
                .is_some_and(|r| r.entries().iter().any(|e| e.offset == *offset)),
            "region {region} offset {offset} not indexed"
        );
    }
}

/// Appends `(region, payload)` entries and flushes; each entry's payload
/// and result, in append order.
async fn append_and_flush(
    writer: &WalWriter,
    entries: &[(RegionId, Bytes)],
) -> Vec<(RegionId, Bytes, Result<i64, Error>)> {
    let mut pending = Vec::new();
    for (region, payload) in entries {
        let appended = writer
            .append(WalEntry::new(*region, payload.clone()))
            .await
            .unwrap();
        pending.push((*region, payload.clone(), appended));
    }
    writer.flush().await.unwrap();
    let mut out = Vec::new();
    for (region, payload, appended) in pending {
        out.push((region, payload, appended.await));
    }
    out
}

/// A topic whose `max.message.bytes` (1200) is below the writer's
/// `max_batch_bytes`: a batch of many small entries is refused
/// `MESSAGE_TOO_LARGE`. Every entry of it once failed, although each would
/// fit alone; the batch is now split and its halves sent again (as the
/// Java producer's `splitAndReenqueue` does), under the same producer id,
/// and only the entry too large alone fails, its error naming its batch's
/// size and the limit.
#[tokio::test]
async fn a_batch_larger_than_the_topic_takes_is_split_and_only_an_entry_too_large_alone_fails() {
    let (scripted, cluster) = scripted().await;
    scripted.set_max_message_bytes(TOPIC, Some(1200)).unwrap();
    let config = WriterConfig::new(TOPIC, 0)
        .with_mode(WriterMode::Interleaved)
        .with_max_batch_bytes(16 << 10)
        .with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut entries: Vec<(RegionId, Bytes)> = (0..24)
        .map(|n| {
            let payload = format!("entry {n} {}", "y".repeat(140));
            ((n % 4 + 1) as RegionId, Bytes::from(payload))
        })
        .collect();
    entries.insert(9, (2, Bytes::from("z".repeat(2000))));
    let results = append_and_flush(&writer, &entries).await;
    let index = writer.close().await.unwrap();
    let mut appended = Vec::new();
    for (n, (region, payload, result)) in results.into_iter().enumerate() {
        match (n, result) {
            (9, Err(e @ Error::EntryTooLarge { bytes, .. })) => {
                assert!(bytes > 2000, "{bytes}");
                assert!(e.to_string().contains("1200 bytes"), "{e}");
            }
            (9, other) => panic!("the entry too large alone: {other:?}"),
            (_, Ok(offset)) => appended.push((region, payload, offset)),
            (n, Err(e)) => panic!("entry {n} fits alone but failed: {e}"),
        }
    }
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.producer_ids.len(), 1, "{layout:?}");
}

/// The message of an entry too large alone names its batch's size and
/// the limit.
#[tokio::test]
async fn an_entry_too_large_alone_fails_naming_its_size_and_the_limit() {
    let (scripted, cluster) = scripted().await;
    scripted.set_max_message_bytes(TOPIC, Some(1000)).unwrap();
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let big = writer
        .append(WalEntry::new(1, "q".repeat(1500)))
        .await
        .unwrap();
    let error = big.await.unwrap_err();
    let Error::EntryTooLarge { bytes, .. } = &error else {
        panic!("{error}");
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("{bytes} bytes")) && message.contains("1000"),
        "{message}"
    );
    assert!(message.contains("MESSAGE_TOO_LARGE"), "{message}");
    // The writer goes on.
    let next = writer.append(WalEntry::new(1, "small")).await.unwrap();
    assert_eq!(next.await.unwrap(), 0);
    writer.close().await.unwrap();
}

/// A flood of batches refused for good (`INVALID_RECORD`, the broker's
/// answer to records it will never take): each refusal once made the
/// writer take a new producer id (InitProducerId), although the broker
/// appended nothing and its sequence was where it was. Now the sequence of
/// what follows is taken back to the refused batch's: one producer id
/// throughout, and everything else written once, in order.
#[tokio::test]
async fn batches_refused_for_good_take_no_new_producer_id() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.reset_stats();
    let mut appended = vec![(1, Bytes::from("first"), 0)];
    for round in 0..4 {
        // The first three of six requests refused: five in flight, the
        // two behind refused for their sequence.
        scripted.script(
            Fault::on(ApiKey::Produce)
                .times(3)
                .then(FaultAction::PartitionError(
                    ResponseError::InvalidRecord.code(),
                )),
        );
        let entries: Vec<(RegionId, Bytes)> = (1..=6)
            .map(|r| (r, Bytes::from(format!("round {round} region {r}"))))
            .collect();
        let results = append_and_flush(&writer, &entries).await;
        for (n, (region, payload, result)) in results.into_iter().enumerate() {
            match result {
                Ok(offset) if n >= 3 => appended.push((region, payload, offset)),
                Err(e) if n < 3 => assert!(e.to_string().contains("INVALID_RECORD"), "{e}"),
                other => panic!("round {round} entry {n}: {other:?}"),
            }
        }
    }
    let index = writer.close().await.unwrap();
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.producer_ids.len(), 1, "{layout:?}");
    let inits = scripted
        .stats(1)
        .unwrap()
        .requests_of(ApiKey::InitProducerId);
    assert_eq!(inits, 0, "InitProducerId requests after the first");
}

/// A batch refused for good (`INVALID_RECORD`) with four in flight behind
/// it, and the connection lost before their answers: certainly not written (their
/// sequences no longer follow), but their answers lost. They once failed
/// saying they may have been written; they are now looked for in the log
/// (not there; one read of it for all four) and sent again, in order,
/// once each.
#[tokio::test]
async fn batches_behind_a_refused_one_whose_answers_were_lost_go_again() {
    let (scripted, cluster) = scripted().await;
    // One region, one entry a batch: their order in the log is checked.
    let config = WriterConfig::new(TOPIC, 0)
        .with_linger(Duration::MAX)
        .with_max_batch_bytes(64);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.reset_stats();
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::InvalidRecord.code(),
    )));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::DropRequest));
    let entries: Vec<(RegionId, Bytes)> = (1..=8)
        .map(|n| (1, Bytes::from(format!("entry {n} of region 1"))))
        .collect();
    let results = append_and_flush(&writer, &entries).await;
    let index = writer.close().await.unwrap();
    assert!(scripted.pending_faults().is_empty());
    // The four batches whose answers were lost are looked for in one read
    // of the log, not one each.
    let fetches = scripted.stats(1).unwrap().requests_of(ApiKey::Fetch);
    assert_eq!(fetches, 1, "Fetch requests to look for them");
    let mut appended = vec![(1, Bytes::from("first"), 0)];
    for (n, (region, payload, result)) in results.into_iter().enumerate() {
        match result {
            Ok(offset) if n > 0 => appended.push((region, payload, offset)),
            Err(e) if n == 0 => assert!(e.to_string().contains("INVALID_RECORD"), "{e}"),
            other => panic!("entry {n}: {other:?}"),
        }
    }
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.pure_batches, 8, "one entry a batch: {layout:?}");
}

/// A writer made in synchronous code, outside any tokio runtime (a
/// server's setup on a thread of its own): `WalWriter::new` panicked ("no
/// reactor running"). Its task now runs in the runtime the cluster was
/// connected in.
#[test]
fn a_writer_made_outside_a_runtime_runs_in_its_clusters() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (scripted, cluster) = runtime.block_on(scripted());
    let writer = std::thread::spawn(move || WalWriter::new(cluster, config(WriterMode::Clustered)))
        .join()
        .expect("made without a panic");
    let offset = runtime.block_on(async {
        let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
        let offset = appended.await.expect("written");
        writer.close().await.expect("closed");
        offset
    });
    assert_eq!(offset, 0);
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 1);
}

/// [`a_batch_whose_answer_was_lost_is_looked_for_before_it_goes_under_a_new_producer_id`]
/// against a broker that answers a fetch allowed to wait under 50 ms with
/// no records and no error below its high watermark (Kafka does when a read
/// from tiered storage outlasts `remote.fetch.max.wait.ms`). The writer
/// looked for the batch with one fetch that may not wait, took the empty
/// answer for "not in the log", and sent the batch again under a new
/// producer id: the entry was written twice. It now asks again, allowing
/// a growing wait, and finds it.
#[tokio::test]
async fn a_lost_answer_is_found_in_a_log_that_answers_hurried_fetches_with_nothing() {
    let (scripted, cluster) = scripted().await;
    scripted
        .set_habits(1, walfetch_testkit::Habits::EMPTY_WHEN_HURRIED)
        .unwrap();
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let once = writer
        .append(WalEntry::new(2, "written once"))
        .await
        .unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    scripted.expire_producers(TOPIC, 0).unwrap();
    let offset = once.await;
    writer.close().await.unwrap();
    let log = read_log(&cluster, TOPIC, 0).await;
    let copies = log
        .iter()
        .flat_map(|b| &b.records)
        .filter(|r| r.value.as_deref() == Some(&b"written once"[..]))
        .count();
    assert_eq!(copies, 1, "the entry is in the log {copies} times");
    assert_eq!(
        offset.unwrap(),
        1,
        "acknowledged where the first send put it"
    );
}

/// ... and against a broker that never reads the log in time (every fetch
/// answered with no records): the search gives up, and the entry fails
/// saying it may have been written (it was), never sent again.
#[tokio::test]
async fn a_lost_answer_not_found_in_a_log_never_read_in_time_may_have_been_written() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted
        .set_habits(
            1,
            walfetch_testkit::Habits {
                empty_below_wait_ms: 60_000,
                ..walfetch_testkit::Habits::KAFKA
            },
        )
        .unwrap();
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let lost = writer.append(WalEntry::new(2, "lost")).await.unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    scripted.expire_producers(TOPIC, 0).unwrap();
    let error = lost.await.unwrap_err();
    assert!(matches!(error, Error::MaybeWritten { .. }), "{error}");
    assert!(error.to_string().contains("held no batch"), "{error}");
    writer.close().await.unwrap();
    scripted
        .set_habits(1, walfetch_testkit::Habits::KAFKA)
        .unwrap();
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 2, "once");
}

/// [`a_batch_whose_answer_cannot_be_decoded_is_looked_for_in_the_log`]
/// against a broker that answers hurried fetches with no records: the
/// entries once failed saying they were not written, while they were in
/// the log (a caller writing them again would write them twice).
#[tokio::test]
async fn an_undecodable_answer_is_found_in_a_log_that_answers_hurried_fetches_with_nothing() {
    let (scripted, cluster) = scripted().await;
    scripted
        .set_habits(1, walfetch_testkit::Habits::EMPTY_WHEN_HURRIED)
        .unwrap();
    let config = config(WriterMode::Clustered).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = written(append_all(&writer, &entries(0, 30)).await);
    // Produce v9's topic count is byte 9 of the frame (see
    // `a_batch_whose_answer_cannot_be_decoded_is_looked_for_in_the_log`).
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 9,
        bytes: vec![0x7f],
    }));
    appended.extend(written(append_all(&writer, &entries(30, 90)).await));
    assert!(scripted.pending_faults().is_empty(), "the fault was met");
    let index = writer.close().await.expect("closed");
    check(&cluster, &appended, &index).await;
}

/// The partition's leader dropped from the cache just after a Metadata
/// read (another partition of the topic answered `NOT_LEADER_OR_FOLLOWER`
/// to a fetch), with a retry backoff of 3 s: the next read of the topic
/// may go only 3 s after the last. The writer task once waited those 3 s
/// inside its next send (the leader lookup), reading no answer: a batch
/// written meanwhile was acknowledged only then. Now its sends wait and its
/// answers do not. Paused clock.
#[tokio::test(start_paused = true)]
async fn a_paced_metadata_read_does_not_hold_back_the_writers_answers() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 2).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        initial_backoff: Duration::from_secs(3),
        max_backoff: Duration::from_secs(3),
        deadline: Duration::from_secs(60),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // A Metadata read now.
    cluster.invalidate(TOPIC);
    cluster.leader(TOPIC, 0).await.unwrap();
    // The next batch is written at once and answered after 200 ms.
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(200))));
    let started = tokio::time::Instant::now();
    let answered_late = writer
        .append(WalEntry::new(2, "answered late"))
        .await
        .unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The topic's leaders dropped from the cache: the next lookup must
    // wait for the next read.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(1)
            .then(FaultAction::PartitionError(
                ResponseError::NotLeaderOrFollower.code(),
            )),
    );
    let fetching = {
        let cluster = Arc::clone(&cluster);
        tokio::spawn(async move {
            let params = walfetch::cluster::FetchParams::new(TOPIC, 1, 0);
            cluster.fetch(&params).await
        })
    };
    while !scripted.pending_faults().is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    // A batch to send while the lookup is held back.
    let behind = writer.append(WalEntry::new(3, "behind")).await.unwrap();
    assert_eq!(answered_late.await.unwrap(), 1);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "a written batch was acknowledged after {took:?}"
    );
    assert_eq!(behind.await.unwrap(), 2);
    fetching.await.unwrap().unwrap();
    writer.close().await.unwrap();
}
