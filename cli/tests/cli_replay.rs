//! The CLI end to end on the real brokers (Apache Kafka and Tansu, one test
//! body): `index build`, `index show`, `replay` (every strategy), and clear
//! errors for a bad address, a missing topic and a corrupt index.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
use walfetch_support::broker::TestBroker;
use walfetch_support::cli::{path, stats_line, stderr, stdout, strings, temp_dir, Cli};
use walfetch_support::on_brokers;
use walfetch_support::recovery::{expected, write_partition, Written};
use walfetch_support::transactions::{region_records, transaction_marker, transactional_batch};

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// `walfetch replay -b ADDR -t TOPIC --index INDEX --region REGION --format
/// raw` and `extra`.
fn replay_raw(addr: &str, topic: &str, index: &Path, region: &str, extra: &[&str]) -> Output {
    WALFETCH.replay_region(
        addr,
        topic,
        index,
        region,
        &[&["--format", "raw"], extra].concat(),
    )
}

async fn build_show_and_replay_from_the_command_line(broker: &TestBroker) {
    let topic = broker.topic("wal");
    let cluster = Arc::new(broker.cluster_with_topic(&topic, 1).await);
    let mut config = WriterConfig::new(&topic, 0);
    config.max_batch_bytes = 1500;
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut pending = Vec::new();
    for n in 0..300u64 {
        let region = n % 3 + (n % 7 == 0) as u64 * 10;
        let payload = Bytes::from(format!("entry {n} of region {region}"));
        pending.push((
            region,
            payload.clone(),
            writer.append(WalEntry::new(region, payload)).await.unwrap(),
        ));
    }
    let (mut region_1, mut region_2) = (Vec::new(), Vec::new());
    for (region, payload, appended) in pending {
        let offset = appended.await.unwrap();
        match region {
            1 => region_1.push((offset, payload)),
            2 => region_2.push((offset, payload)),
            _ => {}
        }
    }
    region_2.sort_by_key(|(offset, _)| *offset);
    writer.close().await.unwrap();

    let dir = temp_dir(&format!("replay-{}", broker.name()));
    let index = dir.join("wal.idx");
    let addr = broker.address();
    let out = WALFETCH.index_build(&addr, &topic, &index, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("indexed 300 records"));

    let out = WALFETCH.run(&["index", "show", path(&index)]);
    assert!(out.status.success());
    let shown = stdout(&out);
    assert!(
        shown.contains("6 regions, 300 entries, last_index 299"),
        "{shown}"
    );

    for strategy in ["index", "estimate", "scan"] {
        let out = WALFETCH.replay_region(
            &addr,
            &topic,
            &index,
            "1",
            &["-p", "0", "--strategy", strategy],
        );
        assert!(out.status.success(), "{strategy}: {}", stderr(&out));
        let got: Vec<(i64, Bytes)> = stdout(&out)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let value = BASE64.decode(v["value"].as_str().unwrap()).unwrap();
                (v["offset"].as_i64().unwrap(), Bytes::from(value))
            })
            .collect();
        assert_eq!(got, region_1, "{strategy}");
        let stats = stats_line(&out);
        assert!(stats["fetches"].as_u64().unwrap() > 0, "{stats}");
        assert!(stats["round_trips"].as_u64().unwrap() <= stats["fetches"].as_u64().unwrap());
        assert_eq!(stats["lost"], serde_json::json!([]));
        // The one broker's link, as learned from the replay's fetches.
        let links = stats["links"].as_object().unwrap();
        assert_eq!(links.len(), 1, "{stats}");
        for link in links.values() {
            assert!(link["answers"].as_u64().unwrap() > 0, "{stats}");
            assert!(link["dear_answers"].as_u64().is_some(), "{stats}");
            assert!(link["widest_merge_gap_bytes"].as_u64().is_some(), "{stats}");
        }
    }

    // The link's figures, and a replay with a cost model set by hand.
    let out = WALFETCH.run(&["calibrate", "-b", &addr, "-t", &topic, "--samples", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let link: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(link["round_trip_us"].as_u64().unwrap() > 0, "{link}");
    assert!(link["merge_gap_bytes"].as_u64().is_some(), "{link}");
    assert!(stderr(&out).contains("--round-trip-us"));
    let out = replay_raw(
        &addr,
        &topic,
        &index,
        "1",
        &["--round-trip-us", "2000", "--bytes-per-second", "1e8"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), region_1.len());

    // Region 2's first five entries: the clustered writer forms each
    // region's batches apart, so where they land depends on timing.
    let to = (region_2[4].0 + 1).to_string();
    let out = replay_raw(&addr, &topic, &index, "2", &["--to", &to]);
    assert!(out.status.success());
    let raw = stdout(&out);
    let want: Vec<String> = region_2[..5]
        .iter()
        .map(|(_, payload)| String::from_utf8_lossy(payload).into_owned())
        .collect();
    assert_eq!(raw.lines().collect::<Vec<_>>(), want, "{raw}");

    // Clear errors.
    let out = WALFETCH.replay_region(&addr, "no-such-topic", &index, "1", &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no-such-topic"), "{}", stderr(&out));

    let corrupt = dir.join("corrupt.idx");
    let mut bytes = std::fs::read(&index).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&corrupt, bytes).unwrap();
    let out = WALFETCH.replay_region(&addr, &topic, &corrupt, "1", &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("corrupt index file") && err.contains("corrupt.idx"),
        "{err}"
    );
}

#[test]
fn an_unreachable_broker_is_a_clear_error() {
    let dir = temp_dir("replay");
    let index = dir.join("empty.idx");
    walfetch::index::write_index_file(&index, &walfetch::index::WalIndex::new()).unwrap();
    // Port 1 on loopback: nothing listens there.
    let out = WALFETCH.replay_region("127.0.0.1:1", "wal", &index, "1", &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

/// A restart from the command line: two partitions, each with its index,
/// every region of a checkpoints file, one pass; each line names its
/// region, topic and partition, and the stats line has every region's
/// figures.
async fn replay_many_regions_over_two_partitions_from_checkpoints(broker: &TestBroker) {
    let topic = broker.topic("wal2");
    let cluster = Arc::new(broker.cluster_with_topic(&topic, 2).await);
    let dir = temp_dir(&format!("replay2-{}", broker.name()));
    let addr = broker.address();
    // Regions 10..13 in partition 0, 20..23 in partition 1.
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..2i32 {
        let mut config = WriterConfig::new(&topic, p);
        config.max_batch_bytes = 1200;
        let entries = (0..120u64).map(|n| {
            let region = 10 * (u64::try_from(p).unwrap() + 1) + n % 3;
            (
                region,
                Bytes::from(format!("p{p} entry {n} of region {region}")),
            )
        });
        let index = write_partition(&cluster, config, entries, &mut written).await;
        let file = dir.join(format!("wal2-{p}.idx"));
        walfetch::index::write_index_file(&file, &index).unwrap();
        indexes.push(file);
    }
    // Each region from its tenth entry on; region 22 is left out.
    let checkpoints: std::collections::BTreeMap<u64, i64> = written
        .values()
        .flatten()
        .filter(|(&r, _)| r != 22)
        .map(|(&r, entries)| (r, entries[10].0))
        .collect();
    let file = dir.join("checkpoints.json");
    let json: serde_json::Map<String, serde_json::Value> = checkpoints
        .iter()
        .map(|(r, from)| (r.to_string(), serde_json::json!(from)))
        .collect();
    std::fs::write(&file, serde_json::Value::Object(json).to_string()).unwrap();
    let two = [
        "replay",
        "-b",
        &addr,
        "-t",
        &format!("{topic}:0"),
        "-t",
        &format!("{topic}:1"),
        "--index",
        path(&indexes[0]),
    ];
    let out = WALFETCH.run(
        &[
            &two[..],
            &["--index", path(&indexes[1]), "--checkpoints", path(&file)],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut got = Written::new();
    for line in stdout(&out).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["topic"].as_str(), Some(topic.as_str()));
        let value = BASE64.decode(v["value"].as_str().unwrap()).unwrap();
        got.entry(i32::try_from(v["partition"].as_i64().unwrap()).unwrap())
            .or_default()
            .entry(v["region"].as_u64().unwrap())
            .or_default()
            .push((v["offset"].as_i64().unwrap(), Bytes::from(value)));
    }
    let checkpoints: std::collections::BTreeMap<(i32, u64), i64> = written
        .iter()
        .flat_map(|(&p, regions)| regions.keys().map(move |&r| (p, r)))
        .filter_map(|(p, r)| checkpoints.get(&r).map(|&from| ((p, r), from)))
        .collect();
    let want = expected(&written, &checkpoints);
    assert!(got == want, "regions differ");
    let stats = stats_line(&out);
    let regions = stats["regions"].as_object().unwrap();
    assert_eq!(regions.len(), checkpoints.len(), "{stats}");
    for (r, entries) in want.values().flatten() {
        assert_eq!(
            regions[&r.to_string()]["entries"].as_u64().unwrap(),
            entries.len() as u64,
            "{stats}"
        );
    }
    // A count of -t's and --index's that differ is an error that says so.
    let out = WALFETCH.run(&[&two[..], &["--region", "10"]].concat());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("2 partition(s) given with -t but 1 --index"),
        "{}",
        stderr(&out)
    );
}

/// A WAL GreptimeDB wrote (its records' keys are its JSON record meta) and
/// GreptimeDB's index of its first part: `index import-greptime`, then
/// `replay --checkpoints` with no region rule given, recovers every region
/// whole, the records past `last_index` included; forced to read the keys
/// another way, it counts the records it found no region in and says so;
/// `index build` says to read such keys with `--region-format greptime`,
/// and with it indexes every record.
async fn a_wal_greptimedb_wrote_is_recovered_with_its_imported_index(broker: &TestBroker) {
    let topic = broker.topic("greptimedb_wal_topic_1");
    let topic = topic.as_str();
    let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
    let written = walfetch_support::greptime::write(&cluster, topic, 40).await;
    let end = walfetch_support::greptime::end(&written);
    let dir = temp_dir(&format!("greptime-{}", broker.name()));
    let json = dir.join("index.json");
    let json_text = walfetch_support::greptime::index_json(topic, &written, end / 2);
    std::fs::write(&json, json_text).unwrap();
    let index = dir.join("wal.idx");
    let out = WALFETCH.run(&[
        "index",
        "import-greptime",
        path(&json),
        "--topic",
        topic,
        "--out",
        path(&index),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checkpoints = dir.join("checkpoints.json");
    // Every region from `from`.
    let checkpoints_from = |from: i64| {
        let all: serde_json::Map<String, serde_json::Value> = written
            .keys()
            .map(|r| (r.to_string(), serde_json::json!(from)))
            .collect();
        std::fs::write(&checkpoints, serde_json::Value::Object(all).to_string()).unwrap();
    };
    checkpoints_from(0);
    let addr = broker.address();
    let replay = [
        "replay",
        "-b",
        &addr,
        "-t",
        topic,
        "--index",
        path(&index),
        "--checkpoints",
        path(&checkpoints),
    ];
    let out = WALFETCH.run(&replay);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut got = walfetch_support::greptime::GreptimeWal::new();
    for line in stdout(&out).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let value = BASE64.decode(v["value"].as_str().unwrap()).unwrap();
        got.entry(v["region"].as_u64().unwrap())
            .or_default()
            .push((v["offset"].as_i64().unwrap(), Bytes::from(value)));
    }
    assert!(got == written, "regions differ");
    let stats = stats_line(&out);
    let tail = stats["tail_records"].as_u64().unwrap();
    assert!(tail > 0, "{stats}");
    assert_eq!(stats["tail_unassigned"], 0, "{stats}");

    // Read with another rule (forced over the index's), from past
    // `last_index` (an indexed entry would be refused as of no region), the
    // tail's records carry no region: counted, and a note says so.
    // GreptimeDB's `last_index` (end / 2) is exclusive: the tail starts
    // there.
    checkpoints_from(end / 2);
    let out =
        WALFETCH.run(&[&replay[..], &["--region-format", "decimal", "--force-rule"]].concat());
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("found no region id in"), "{err}");
    let stats = stats_line(&out);
    assert_eq!(stats["entries"], 0, "{stats}");
    assert_eq!(stats["tail_unassigned"].as_u64().unwrap(), tail, "{stats}");

    // Built by scanning: the default rule (the key, big-endian) finds no
    // region in GreptimeDB's keys, and says how to read them.
    let built = dir.join("built.idx");
    let out = WALFETCH.index_build(&addr, topic, &built, &[]);
    let err = stderr(&out);
    assert!(err.contains("--region-format greptime"), "{err}");
    let out = WALFETCH.index_build(&addr, topic, &built, &["--region-format", "greptime"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let records = written.values().map(Vec::len).sum::<usize>();
    assert!(err.contains(&format!("indexed {records} records")), "{err}");
    assert!(!err.contains("--region-format"), "{err}");
}

/// `index build` indexes what a `read_committed` consumer reads, but
/// `replay` read the log past `last_index` (and all of it with `--strategy
/// scan`) as `read_uncommitted`: the records of an aborted transaction came
/// out as WAL entries. A replay reads as `read_committed` by default, as a
/// Kafka consumer does; `--read-uncommitted` or librdkafka's `-X
/// isolation.level=read_uncommitted` opts out. On the scripted broker,
/// which lists a fetch's aborted transactions as Kafka does (Tansu 0.6
/// lists none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_leaves_out_aborted_transactions_unless_asked() {
    use walfetch::codec::{BatchBuilder, ControlType, EncodedBatch};
    use walfetch_testkit::ScriptedCluster;

    let cluster = ScriptedCluster::builder().brokers(1).start().await.unwrap();
    cluster.create_topic("wal", 1).unwrap();
    let entries = |tag: &str| region_records(5, tag, 3);
    let append = |b: EncodedBatch| cluster.append("wal", 0, b.bytes).unwrap();
    append(BatchBuilder::new(0).encode(&entries("plain")).unwrap());
    append(transactional_batch(2, &entries("aborted")));
    append(transaction_marker(2, 3, ControlType::Abort));
    append(BatchBuilder::new(0).encode(&entries("tail")).unwrap());
    let addr = cluster.bootstrap();
    let dir = temp_dir("aborted");
    let index = dir.join("wal.idx");
    // The first batch indexed: the aborted transaction is past last_index.
    let out = WALFETCH
        .index_build_async(&addr, "wal", &index, &["--to", "3"])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let base = [
        "replay", "-b", &addr, "-t", "wal", "--region", "5", "--format", "raw",
    ];
    let committed = "plain 0\nplain 1\nplain 2\ntail 0\ntail 1\ntail 2\n";
    let with_aborted = "plain 0\nplain 1\nplain 2\naborted 0\naborted 1\naborted 2\n\
                        tail 0\ntail 1\ntail 2\n";
    for strategy in [&["--index", path(&index)][..], &["--strategy", "scan"]] {
        for (isolation, want) in [
            (&[][..], committed),
            (&["--read-committed"], committed),
            (&["-X", "isolation.level=read_committed"], committed),
            (&["--read-uncommitted"], with_aborted),
            (&["-X", "isolation.level=read_uncommitted"], with_aborted),
        ] {
            let out = WALFETCH
                .run_async(strings(&[&base[..], strategy, isolation].concat()))
                .await;
            assert!(
                out.status.success(),
                "{strategy:?} {isolation:?}: {}",
                stderr(&out)
            );
            assert_eq!(stdout(&out), want, "{strategy:?} {isolation:?}");
        }
    }
    // The two flags contradict each other; index build never indexes
    // aborted records, whatever a shared properties file says.
    let out = WALFETCH
        .run_async(strings(
            &[
                &base[..],
                &[
                    "--strategy",
                    "scan",
                    "--read-committed",
                    "--read-uncommitted",
                ],
            ]
            .concat(),
        ))
        .await;
    assert!(!out.status.success());
    let out = WALFETCH
        .index_build_async(
            &addr,
            "wal",
            &index,
            &["-X", "isolation.level=read_uncommitted"],
        )
        .await;
    assert!(
        !out.status.success() && stderr(&out).contains("index build reads as read_committed only"),
        "{}",
        stderr(&out)
    );
}

on_brokers!(
    build_show_and_replay_from_the_command_line,
    replay_many_regions_over_two_partitions_from_checkpoints,
    a_wal_greptimedb_wrote_is_recovered_with_its_imported_index,
);
