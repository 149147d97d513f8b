//! The index binds to what it indexed, from the command line on the real
//! brokers (Apache Kafka and Tansu, one test body): `index show` prints what an index indexes; `replay`
//! refuses an index of another partition, a rule other than the index's
//! unless `--force-rule` (and then checks every entry), a region the index
//! does not list unless the log past `last_index` may hold it (a note
//! then), a start below the index's first offset; `index build --from`
//! inside a batch indexes every record from there; `index build` warns of a
//! rule that finds no region and of decimal ids read big-endian.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::writer::{WriterConfig, WriterMode};
use walfetch_support::broker::TestBroker;
use walfetch_support::cli::{path, stderr, temp_dir, Cli};
use walfetch_support::on_brokers;
use walfetch_support::recovery::{write_partition, Written};

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// Runs walfetch expecting success; its stdout and stderr.
fn ok(args: &[&str]) -> (String, String) {
    let out = WALFETCH.run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr(&out),
    )
}

/// Runs walfetch expecting failure with `message` on stderr.
fn fails_with(args: &[&str], message: &str) {
    let out = WALFETCH.run(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert!(err.contains(message), "{args:?}: {err}");
}

/// `walfetch replay -b ADDR --format raw` and `extra`.
fn replay_args(addr: &str, extra: &[&str]) -> Vec<String> {
    ["replay", "-b", addr, "--format", "raw"]
        .iter()
        .chain(extra)
        .map(|s| (*s).to_owned())
        .collect()
}

/// `walfetch index build -b ADDR -t TOPIC`, `extra` and `--out OUT`,
/// expecting success; its stderr.
fn index_build(addr: &str, topic: &str, extra: &[&str], out: &Path) -> String {
    let mut args = vec!["index", "build", "-b", addr, "-t", topic];
    args.extend_from_slice(extra);
    args.extend(["--out", path(out)]);
    ok(&args).1
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

async fn the_index_binds_to_what_it_indexed(broker: &TestBroker) {
    let topic = broker.topic("wal");
    let cluster = Arc::new(broker.cluster_with_topic(&topic, 2).await);
    // Partition 0: regions 1 to 3 by the WAL writer (8-byte big-endian
    // keys), in batches of about ten entries.
    // Interleaved: entry n at offset n, which the checks below name.
    let mut config = WriterConfig::new(&topic, 0).with_mode(WriterMode::Interleaved);
    config.max_batch_bytes = 400;
    let entries = (0..120u64).map(|n| (n % 3 + 1, Bytes::from(format!("entry {n:04}"))));
    let mut written = Written::new();
    write_partition(&cluster, config, entries, &mut written).await;
    // Partition 1: decimal keys.
    for b in 0..3 {
        let records: Vec<NewRecord> = (0..10)
            .map(|i| NewRecord {
                offset_delta: i,
                key: Some(Bytes::from((i % 3 + 1).to_string())),
                value: Some(Bytes::from(format!("b{b} r{i}"))),
                ..NewRecord::default()
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        cluster.produce(&topic, 1, batch.bytes).await.unwrap();
    }

    let dir = temp_dir(&format!("bind-{}", broker.name()));
    let addr = broker.address();
    let p0 = dir.join("p0.idx");
    let err = index_build(&addr, &topic, &[], &p0);
    assert!(!err.contains("warning"), "{err}");
    let (shown, _) = ok(&["index", "show", path(&p0)]);
    assert!(
        shown.contains(&format!("source: topic \"{topic}\", partition 0,"))
            && shown.contains("first offset 0, region rule key, be"),
        "{shown}"
    );
    // `replay -t TOPIC --index INDEX --region REGION` and `extra`.
    let replay_region = |topic: &str, index: &Path, region: &str, extra: &[&str]| {
        let mut args = vec!["-t", topic, "--index", path(index), "--region", region];
        args.extend_from_slice(extra);
        replay_args(&addr, &args)
    };

    // Another partition.
    let args = replay_region(&format!("{topic}:1"), &p0, "1", &[]);
    fails_with(&refs(&args), "the index is of partition 0");

    // Another rule: refused; forced, every entry is checked by it.
    let args = replay_region(&topic, &p0, "1", &["--region-format", "decimal"]);
    fails_with(
        &refs(&args),
        "differs from the one the index was built with (key, be)",
    );
    let mut forced = args.clone();
    forced.push("--force-rule".into());
    fails_with(
        &refs(&forced),
        "the index does not match this partition at offset 0",
    );
    // The index's own rule, given or not, replays.
    let args = replay_region(&topic, &p0, "1", &[]);
    let (out, _) = ok(&refs(&args));
    assert_eq!(out.lines().count(), 40, "{out}");

    // A region the index does not list, wholly inside the index: an error.
    let args = replay_region(&topic, &p0, "99", &[]);
    fails_with(&refs(&args), "region 99 has no entry in the index");
    // Indexed up to 59 only, the rest may hold it: a note, and a replay.
    let half = dir.join("half.idx");
    index_build(&addr, &topic, &["--to", "60"], &half);
    let args = replay_region(&topic, &half, "99", &[]);
    let (out, err) = ok(&refs(&args));
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!(
            "note: region 99 is not in the index of {topic}:0: only the records past offset 59"
        )),
        "{err}"
    );

    // From inside a batch (Kafka answers from the batch holding offset 5,
    // Tansu from the next batch): every record from there is indexed, and
    // the index starts there.
    let from = dir.join("from.idx");
    let err = index_build(&addr, &topic, &["--from", "5"], &from);
    assert!(err.contains("indexed 115 records"), "{err}");
    let (shown, _) = ok(&["index", "show", path(&from)]);
    assert!(shown.contains("first offset 5,"), "{shown}");
    let args = replay_region(&topic, &from, "3", &["--from", "5"]);
    let (out, _) = ok(&refs(&args));
    assert_eq!(out.lines().next(), Some("entry 0005"), "{out}");
    let args = replay_region(&topic, &from, "3", &["--from", "4"]);
    fails_with(&refs(&args), "the index covers offsets from 5 only");

    // Warnings: decimal keys read big-endian; a rule that finds nothing.
    let p1 = dir.join("p1.idx");
    let err = index_build(&addr, &topic, &["-p", "1"], &p1);
    assert!(
        err.contains("warning: every region id of the 30 records is ASCII digits"),
        "{err}"
    );
    let err = index_build(&addr, &topic, &["-p", "1", "--region-header", "shard"], &p1);
    assert!(
        err.contains("warning: the region rule (header \"shard\", be) found no region in 30 of 30"),
        "{err}"
    );
    let err = index_build(
        &addr,
        &topic,
        &["-p", "1", "--region-format", "decimal"],
        &p1,
    );
    assert!(!err.contains("warning"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

on_brokers!(the_index_binds_to_what_it_indexed);
