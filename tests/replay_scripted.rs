//! Replays against the scripted broker, which follows Kafka's fetch rules
//! exactly (it cuts responses mid-batch at the byte limit), with faults
//! injected mid-replay and with other brokers' habits: nothing is lost,
//! nothing duplicated, and lost offsets are reported, not hidden.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::calibrate::measure_link;
use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
use walfetch::codec::Compression;
use walfetch::consumer::{Consumer, LostPolicy, ReplayOptions, ReplayStats, StrategyKind};
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
use walfetch_support::recovery::to_the_end;
use walfetch_support::scripted::scripted_with_topic;
use walfetch_support::transactions::{region_records, transaction_marker, transactional_batch};
use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

const TOPIC: &str = "wal";

type Written = BTreeMap<RegionId, Vec<(i64, Bytes)>>;

/// A scripted cluster with `entries` entries of 8 regions written by the
/// WAL writer, and the writer's index.
async fn setup(
    brokers: usize,
    entries: usize,
    compression: Compression,
) -> (ScriptedCluster, Arc<Cluster>, Written, WalIndex) {
    setup_sized(brokers, entries, compression, 400, 4 << 10).await
}

/// [`setup`] with payloads of up to `max_payload` bytes (random beyond 400,
/// so that compression does not shrink them away) in batches of up to
/// `batch_bytes`.
async fn setup_sized(
    brokers: usize,
    entries: usize,
    compression: Compression,
    max_payload: usize,
    batch_bytes: usize,
) -> (ScriptedCluster, Arc<Cluster>, Written, WalIndex) {
    let scripted = ScriptedCluster::start(brokers)
        .await
        .expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(20),
        ..RetryPolicy::default()
    };
    config.connection.request_timeout = Duration::from_secs(2);
    let cluster = Arc::new(Cluster::connect(config).await.expect("connect"));
    let mut writer_config = WriterConfig::new(TOPIC, 0);
    writer_config.compression = compression;
    writer_config.max_batch_bytes = batch_bytes;
    let writer = WalWriter::new(Arc::clone(&cluster), writer_config);
    let mut pending = Vec::new();
    let mut rng = StdRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
    for n in 0..entries {
        let region = rng.random_range(0..8u64).min(rng.random_range(0..8u64));
        let len = rng.random_range(0..max_payload);
        let mut payload = format!("r{region} n{n} {}", "y".repeat(len.min(400)));
        // Beyond 400 bytes, noise that compression cannot shrink away.
        while payload.len() < len {
            payload.push_str(&format!("{:016x}", rng.random::<u64>()));
        }
        let payload = Bytes::from(payload);
        let appended = writer
            .append(WalEntry::new(region, payload.clone()))
            .await
            .expect("queue");
        pending.push((region, payload, appended));
    }
    let mut written = Written::new();
    for (region, payload, appended) in pending {
        written
            .entry(region)
            .or_default()
            .push((appended.await.expect("written"), payload));
    }
    let index = writer.close().await.expect("close");
    (scripted, cluster, written, index)
}

async fn replay_with(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    region: RegionId,
    options: ReplayOptions,
) -> (Result<Vec<(i64, Bytes)>, Error>, ReplayStats) {
    let range = to_the_end(TOPIC, region, 0);
    let mut consumer = match Consumer::new(Arc::clone(cluster), index, range, options).await {
        Ok(c) => c,
        Err(e) => return (Err(e), ReplayStats::default()),
    };
    let mut out = Vec::new();
    while let Some(record) = consumer.next().await {
        match record {
            // Records of other regions never reach the caller, not even
            // from the scan past `last_index`.
            Ok(r) => {
                assert_eq!(r.key(), Some(&region.to_be_bytes()[..]), "{}", r.offset());
                out.push((r.offset(), r.value_bytes().expect("value")))
            }
            Err(e) => return (Err(e), consumer.stats().clone()),
        }
    }
    (Ok(out), consumer.stats().clone())
}

#[tokio::test]
async fn kafka_rules_every_region_every_strategy_and_fewer_bytes_than_a_scan() {
    for compression in [Compression::None, Compression::Zstd] {
        let (_broker, cluster, written, index) = setup(1, 1500, compression).await;
        for (&region, want) in &written {
            let mut bytes = BTreeMap::new();
            for strategy in [
                StrategyKind::Index,
                StrategyKind::Estimate,
                StrategyKind::Scan,
            ] {
                let options = ReplayOptions::default().with_strategy(strategy);
                let (got, stats) = replay_with(&cluster, &index, region, options).await;
                let got = got
                    .unwrap_or_else(|e| panic!("{compression} {strategy:?} region {region}: {e}"));
                assert!(
                    &got == want,
                    "{compression} {strategy:?} region {region}: {} of {} entries",
                    got.len(),
                    want.len()
                );
                assert!(
                    stats.floor_bytes > 0 && stats.floor_bytes <= stats.records_bytes,
                    "{compression} {strategy:?} region {region}: floor {} > received {}",
                    stats.floor_bytes,
                    stats.records_bytes
                );
                if strategy == StrategyKind::Index {
                    assert!(stats.round_trips <= stats.fetches, "{stats:?}");
                } else {
                    // One fetch in flight: every fetch is a round trip.
                    assert_eq!(stats.round_trips, stats.fetches, "{strategy:?}");
                }
                bytes.insert(format!("{strategy:?}"), stats.wire_bytes);
            }
            assert!(
                bytes["Index"] <= bytes["Scan"],
                "{compression} region {region}: {bytes:?}"
            );
        }
    }
}

#[tokio::test]
async fn every_strategy_on_kafka_rules_and_on_other_brokers_habits() {
    let (broker, cluster, written, index) = setup(1, 800, Compression::None).await;
    let offsets_only = index.without_hints();
    for habits in [
        Habits::KAFKA,
        Habits::TANSU_0_6,
        Habits {
            never_cut: true,
            ..Habits::KAFKA
        },
        Habits {
            repeat_last_batch: true,
            ..Habits::KAFKA
        },
        Habits::OMITS_WHEN_HURRIED,
        Habits {
            omit_below_wait_ms: 50,
            ..Habits::TANSU_0_6
        },
        Habits::EMPTY_WHEN_HURRIED,
    ] {
        for node in broker.node_ids() {
            broker.set_habits(node, habits).expect("habits");
        }
        let runs = [
            (&index, StrategyKind::Index),
            (&offsets_only, StrategyKind::Index),
            (&offsets_only, StrategyKind::Estimate),
            (&offsets_only, StrategyKind::Scan),
        ];
        for (idx, strategy) in runs {
            for (&region, want) in &written {
                let options = ReplayOptions::default().with_strategy(strategy);
                let (got, stats) = replay_with(&cluster, idx, region, options).await;
                let got =
                    got.unwrap_or_else(|e| panic!("{habits:?} {strategy:?} region {region}: {e}"));
                assert!(&got == want, "{habits:?} {strategy:?} region {region}");
                let omits = habits.omit_below_wait_ms > 0;
                assert_eq!(stats.omitted > 0, omits, "{habits:?} {stats:?}");
            }
        }
    }
}

/// Without hints, walfetch's planner moves fewer bytes than the estimate
/// strategy and waits on fewer round trips, on every region.
#[tokio::test]
async fn offsets_only_beats_the_estimate_on_bytes_and_round_trips() {
    let mut pipelined = (0, 0);
    for compression in [Compression::None, Compression::Lz4] {
        let (_broker, cluster, written, index) =
            setup_sized(1, 4000, compression, 8 << 10, 64 << 10).await;
        let offsets_only = index.without_hints();
        for &region in written.keys() {
            let mut stats = Vec::new();
            for strategy in [StrategyKind::Index, StrategyKind::Estimate] {
                let options = ReplayOptions::default().with_strategy(strategy);
                let (got, s) = replay_with(&cluster, &offsets_only, region, options).await;
                assert!(got.unwrap() == written[&region], "{strategy:?}");
                stats.push(s);
            }
            let (ours, estimate) = (&stats[0], &stats[1]);
            let context = format!("{compression} region {region}: {ours:?} vs {estimate:?}");
            assert!(ours.wire_bytes < estimate.wire_bytes, "{context}");
            assert!(ours.round_trips < estimate.round_trips, "{context}");
            pipelined.0 += ours.fetches;
            pipelined.1 += ours.round_trips;
        }
    }
    // Fetches sent together share a round trip.
    assert!(pipelined.1 < pipelined.0, "{pipelined:?}");
}

#[tokio::test]
async fn faults_mid_replay_lose_and_duplicate_nothing() {
    let (broker, cluster, written, index) = setup(2, 800, Compression::Lz4).await;
    let other = broker.node_ids()[1];
    let faults = [
        FaultAction::CutDuringResponse { bytes: None },
        FaultAction::CutBeforeResponse,
        FaultAction::CutAfterResponse,
        FaultAction::DropRequest,
        FaultAction::PartitionError(6), // NOT_LEADER_OR_FOLLOWER
        FaultAction::MoveLeader { to: other },
        FaultAction::Delay(Duration::from_secs(3)), // over the 2 s request timeout
        FaultAction::TruncatedFrame { missing: 10 },
    ];
    let (&region, want) = written
        .iter()
        .max_by_key(|(_, v)| v.len())
        .expect("a region");
    for fault in faults {
        // Let the replay start, then fail its 2nd and 3rd fetches.
        broker.clear_faults();
        broker.script(
            Fault::on(ApiKey::Fetch)
                .times(1)
                .then(FaultAction::Delay(Duration::ZERO)),
        );
        broker.script(Fault::on(ApiKey::Fetch).times(2).then(fault.clone()));
        let options = ReplayOptions::default().with_max_in_flight(2);
        let (got, _) = replay_with(&cluster, &index, region, options).await;
        let got = got.unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert!(
            &got == want,
            "{fault:?}: {} of {} entries",
            got.len(),
            want.len()
        );
    }
}

#[tokio::test]
async fn lost_offsets_are_an_error_by_default_and_reported_when_skipped() {
    let (broker, cluster, written, index) = setup(1, 400, Compression::None).await;
    let (&region, want) = written
        .iter()
        .max_by_key(|(_, v)| v.len())
        .expect("a region");
    // Retention removed the first batches.
    let cut = want[want.len() / 3].0;
    broker.advance_log_start(TOPIC, 0, cut).expect("truncate");
    let (got, _) = replay_with(&cluster, &index, region, ReplayOptions::default()).await;
    match got {
        Err(Error::LostOffsets { offsets, .. }) => {
            assert_eq!(offsets[0], want[0].0, "names the first lost offset");
        }
        other => panic!("expected LostOffsets, got {other:?}"),
    }
    for strategy in [StrategyKind::Index, StrategyKind::Estimate] {
        let skip = ReplayOptions::default()
            .with_strategy(strategy)
            .with_on_lost(LostPolicy::Skip);
        let (got, stats) = replay_with(&cluster, &index, region, skip).await;
        let got = got.unwrap_or_else(|e| panic!("{strategy:?}: {e}"));
        let kept: Vec<_> = want.iter().filter(|(o, _)| *o >= cut).cloned().collect();
        assert_eq!(got, kept, "{strategy:?}");
        let lost: Vec<i64> = want
            .iter()
            .filter(|(o, _)| *o < cut)
            .map(|(o, _)| *o)
            .collect();
        assert_eq!(stats.lost, lost, "{strategy:?}");
    }
    // A tail scan that starts below the log start resumes at it.
    let mut short = WalIndex::new();
    short.set_last_index(0);
    let skip = ReplayOptions::default().with_on_lost(LostPolicy::Skip);
    let (got, _) = replay_with(&cluster, &short, region, skip).await;
    let kept: Vec<_> = want.iter().filter(|(o, _)| *o >= cut).cloned().collect();
    assert_eq!(got.expect("tail"), kept);
}

/// A replay reads as `read_committed` by default (a WAL must never replay
/// an aborted write): records of aborted transactions are left out, in the
/// indexed range and past `last_index` alike; `read_uncommitted`, asked
/// for, yields them.
#[tokio::test]
async fn read_committed_drops_aborted_transactions_and_control_batches() {
    use walfetch::cluster::IsolationLevel;
    use walfetch::codec::{BatchBuilder, ControlType};
    use walfetch::index::IndexEntry;

    let (broker, cluster) = scripted_with_topic(1, TOPIC, 1).await;
    let region: RegionId = 5;
    let entries = |tag: &str| region_records(region, tag, 3);
    let append =
        |b: walfetch::codec::EncodedBatch| broker.append(TOPIC, 0, b.bytes).expect("append");
    // committed txn (producer 1), aborted txn (producer 2), plain batch, and
    // a tail: another aborted txn and a plain batch.
    let committed = append(transactional_batch(1, &entries("committed")));
    let aborted = append(transactional_batch(2, &entries("aborted")));
    append(transaction_marker(1, 3, ControlType::Commit));
    append(transaction_marker(2, 3, ControlType::Abort));
    let plain = append(BatchBuilder::new(0).encode(&entries("plain")).unwrap());
    let tail_aborted = append(transactional_batch(3, &entries("tail-aborted")));
    append(transaction_marker(3, 3, ControlType::Abort));
    let tail_plain = append(BatchBuilder::new(0).encode(&entries("tail-plain")).unwrap());

    // The index covers the committed and plain entries, up to the plain batch.
    let mut index = WalIndex::new();
    for base in [committed, plain] {
        for i in 0..3 {
            index
                .push(region, IndexEntry::offset_only(base + i))
                .unwrap();
        }
    }
    index.set_last_index(plain + 2);
    let options = ReplayOptions::default();
    assert_eq!(options.isolation, IsolationLevel::ReadCommitted);
    let (got, stats) = replay_with(&cluster, &index, region, options.clone()).await;
    let got: Vec<i64> = got
        .expect("read_committed replay")
        .into_iter()
        .map(|(o, _)| o)
        .collect();
    let want: Vec<i64> = [committed, plain, tail_plain]
        .iter()
        .flat_map(|&b| b..b + 3)
        .collect();
    assert_eq!(got, want, "no aborted record, no control record");
    assert!(stats.lost.is_empty());
    assert!(aborted > committed && tail_aborted > plain);
    // read_uncommitted: the aborted transaction past last_index is read.
    let uncommitted = options
        .clone()
        .with_isolation(IsolationLevel::ReadUncommitted);
    let (got, _) = replay_with(&cluster, &index, region, uncommitted).await;
    let got: Vec<i64> = got.unwrap().into_iter().map(|(o, _)| o).collect();
    assert!(
        got.contains(&tail_aborted),
        "read_uncommitted yields aborted records: {got:?}"
    );

    // An indexed entry inside an aborted transaction is reported, not yielded.
    let mut with_aborted = index.clone();
    let mut entries_of_region = Vec::new();
    for (_, r) in index.regions() {
        entries_of_region.extend(r.offsets());
    }
    entries_of_region.push(aborted + 1);
    entries_of_region.sort_unstable();
    with_aborted = {
        let mut i = WalIndex::new();
        for o in entries_of_region {
            i.push(region, IndexEntry::offset_only(o)).unwrap();
        }
        i.set_last_index(with_aborted.last_index().unwrap());
        i
    };
    let (got, _) = replay_with(&cluster, &with_aborted, region, options).await;
    assert!(
        matches!(got, Err(Error::LostOffsets { ref offsets, .. }) if offsets == &vec![aborted + 1]),
        "{got:?}"
    );
}

/// A transaction left open holds a read_committed replay at its first
/// offset (the last stable offset): its records may yet be aborted. A
/// checkpoint between that and the high watermark has nothing to read
/// yet; it is not "past the log's end" (which it was said to be when the
/// end was taken to be the last stable offset).
#[tokio::test]
async fn a_transaction_left_open_ends_a_read_committed_replay_where_it_began() {
    use walfetch::codec::BatchBuilder;

    let (broker, cluster) = scripted_with_topic(1, TOPIC, 1).await;
    let region: RegionId = 5;
    let entries = |tag: &str| region_records(region, tag, 3);
    let append =
        |b: walfetch::codec::EncodedBatch| broker.append(TOPIC, 0, b.bytes).expect("append");
    append(BatchBuilder::new(0).encode(&entries("before")).unwrap());
    let open = append(transactional_batch(7, &entries("open")));
    let after = append(BatchBuilder::new(0).encode(&entries("after")).unwrap());
    // The first batch indexed; the rest is read by the scan past it.
    let mut index = WalIndex::new();
    for offset in 0..3 {
        index
            .push(region, walfetch::index::IndexEntry::offset_only(offset))
            .unwrap();
    }
    index.set_last_index(2);
    let (got, _) = replay_with(&cluster, &index, region, ReplayOptions::default()).await;
    let got: Vec<i64> = got.unwrap().into_iter().map(|(o, _)| o).collect();
    assert_eq!(got, vec![0, 1, 2], "up to the open transaction only");
    // From a checkpoint past the last stable offset: nothing yet.
    let range = to_the_end(TOPIC, region, after);
    let mut consumer = Consumer::new(
        Arc::clone(&cluster),
        &index,
        range,
        ReplayOptions::default(),
    )
    .await
    .expect("a checkpoint below the high watermark is not past the log's end");
    assert!(consumer.next().await.is_none());
    assert!(open < after);
}

/// `measure_link` times real fetches: a broker that answers 30 ms late
/// shows a round trip of at least that, and the planner's merge gap grows
/// with it.
#[tokio::test]
async fn calibration_measures_the_round_trip_and_bandwidth() {
    let (broker, cluster, _, _) = setup_sized(1, 600, Compression::None, 4000, 64 << 10).await;
    let quick = measure_link(&cluster, TOPIC, 0, 3).await.unwrap();
    let bandwidth = quick.bytes_per_second.expect("1 MB of records: enough");
    assert!(
        bandwidth > 0.0 && quick.bandwidth_fetch_bytes >= 256 << 10,
        "{quick:?}"
    );
    let delay = Duration::from_millis(30);
    broker.script(
        Fault::on(ApiKey::Fetch)
            .times(100)
            .then(FaultAction::Delay(delay)),
    );
    let slow = measure_link(&cluster, TOPIC, 0, 3).await.unwrap();
    assert!(slow.round_trip >= delay, "{slow:?}");
    assert!(
        slow.cost_model(4).merge_gap_bytes() > quick.cost_model(4).merge_gap_bytes(),
        "{quick:?} {slow:?}"
    );
}

/// Producer 2 aborted a transaction of region 9 (0..=2, its marker at 3),
/// then committed one of region 5 (4..=7, its marker at 8). A
/// read_committed replay of region 5 from 5 with an offsets-only index (as
/// imported from GreptimeDB) gets the committed records, on Kafka's rules
/// and on a broker that skips the batch holding a mid-batch fetch offset.
/// There the planner backs off below 5, and the answer carries the abort
/// marker below the wanted offsets with the aborted transaction listed:
/// the marker must still end that transaction (as Kafka's consumer feeds
/// every batch of an answer to its filter), or the committed records are
/// taken for aborted and reported lost.
#[tokio::test]
async fn read_committed_keeps_a_committed_transaction_after_an_aborted_one_of_its_producer() {
    use walfetch::cluster::IsolationLevel;
    use walfetch::codec::{BatchBuilder, ControlType, NewRecord};
    use walfetch::index::IndexEntry;

    let keyed = |region: RegionId, n: i32| -> Vec<NewRecord> {
        (0..n)
            .map(|i| NewRecord {
                offset_delta: i,
                key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                value: Some(Bytes::from(format!("r{region} {i}"))),
                ..NewRecord::default()
            })
            .collect()
    };
    for habits in [Habits::KAFKA, Habits::TANSU_0_6] {
        let broker = ScriptedCluster::builder()
            .habits(habits)
            .start()
            .await
            .expect("scripted broker");
        broker.create_topic(TOPIC, 1).expect("topic");
        let cluster = Arc::new(
            Cluster::connect(ClusterConfig::new([broker.bootstrap()]))
                .await
                .expect("connect"),
        );
        let append = |b: walfetch::codec::EncodedBatch| broker.append(TOPIC, 0, b.bytes).unwrap();
        let transaction = |sequence, region, n| {
            BatchBuilder::new(0)
                .producer(2, 0, sequence)
                .transactional(true)
                .encode(&keyed(region, n))
                .unwrap()
        };
        let marker = |sequence, kind| {
            BatchBuilder::new(0)
                .producer(2, 0, sequence)
                .encode_marker(kind, 0, 0)
                .unwrap()
        };
        append(transaction(0, 9, 3));
        append(marker(3, ControlType::Abort));
        let committed = append(transaction(3, 5, 4));
        append(marker(7, ControlType::Commit));
        assert_eq!(committed, 4);

        let mut index = WalIndex::new();
        for offset in 4..8 {
            index.push(5, IndexEntry::offset_only(offset)).unwrap();
        }
        index.set_last_index(8);
        let range = to_the_end(TOPIC, 5, 5);
        let options = ReplayOptions::default().with_isolation(IsolationLevel::ReadCommitted);
        let mut consumer = Consumer::new(Arc::clone(&cluster), &index, range, options)
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(record) = consumer.next().await {
            got.push(record.map(|r| r.offset()).map_err(|e| e.to_string()));
        }
        assert_eq!(got, [Ok(5), Ok(6), Ok(7)], "{habits:?}");
    }
}
