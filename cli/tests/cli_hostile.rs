//! The CLI under hostile input (issue #12, "The CLI survives hostile
//! input"): a closed stdout, absurd counts, negative offsets, files that are
//! not what they claim, and messages that say plainly what is wrong. The
//! commands that talk to Kafka run against the scripted in-process broker.
#![allow(clippy::unwrap_used)]

mod run;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use run::{path, stderr, stdout, temp_dir, walfetch};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::index::{write_index_file, IndexEntry, WalIndex};
use walfetch_testkit::{Habits, ScriptedCluster};

/// Records per batch of [`wal`]'s partition.
const PER_BATCH: i64 = 30;
/// Batches of [`wal`]'s partition.
const BATCHES: i64 = 100;
/// Regions of [`wal`]'s partition: record `n` is region `n % REGIONS`.
const REGIONS: i64 = 7;

/// A one-broker scripted cluster with topic `wal`, partition 0:
/// [`BATCHES`] batches of [`PER_BATCH`] records, keyed by region (8-byte
/// big-endian), valued `entry <n> region <r>`.
async fn wal() -> ScriptedCluster {
    wal_of(1).await
}

/// [`wal`] with `partitions` partitions, each holding the same records.
async fn wal_of(partitions: i32) -> ScriptedCluster {
    let cluster = ScriptedCluster::builder().brokers(1).start().await.unwrap();
    cluster.create_topic("wal", partitions).unwrap();
    for partition in 0..partitions {
        fill(&cluster, partition);
    }
    cluster
}

/// Appends [`wal`]'s records to `partition`.
fn fill(cluster: &ScriptedCluster, partition: i32) {
    for b in 0..BATCHES {
        let records: Vec<NewRecord> = (0..PER_BATCH)
            .map(|i| {
                let n = b * PER_BATCH + i;
                let region = (n % REGIONS) as u64;
                NewRecord {
                    timestamp: 1000 + n,
                    key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                    value: Some(Bytes::from(format!("entry {n} region {region}"))),
                    headers: vec![],
                    offset_delta: i32::try_from(i).unwrap(),
                }
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        cluster.append("wal", partition, batch.bytes).unwrap();
    }
}

/// Runs a command (off the async runtime's threads).
async fn walfetch_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        walfetch(&args)
    })
    .await
    .unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs a command whose reader goes away: after `lines` lines of stdout
/// (0: before the command writes anything), the pipe is closed. Returns
/// the exit status and stderr.
fn with_stdout_closed_after(args: &[String], lines: usize) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run walfetch");
    let stdout = child.stdout.take().unwrap();
    if lines > 0 {
        let mut reader = BufReader::new(stdout);
        for _ in 0..lines {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "{args:?}: fewer than {lines} lines");
        }
        drop(reader);
    } else {
        drop(stdout);
    }
    child.wait_with_output().unwrap()
}

/// Asserts a command closed early by its reader ended as `replay` does:
/// exit 0, no panic, no error.
fn assert_clean_exit(what: &str, out: &Output) {
    let err = stderr(out);
    assert!(
        out.status.success(),
        "{what}: {:?}, stderr: {err}",
        out.status
    );
    assert!(
        !err.contains("panicked") && !err.contains("error"),
        "{what}: {err}"
    );
}

/// Runs a command that must fail within `limit` (it is killed otherwise):
/// for inputs that once made a command read or allocate without bound.
fn fails_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run walfetch");
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ran past {limit:?}: it does not stop on its own");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    out
}

/// The stats line of a replay: the last line on stderr, one JSON object.
fn stats_line(out: &Output) -> serde_json::Value {
    let err = stderr(out);
    let last = err.trim().lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("the last line on stderr is not the stats line ({e}): {err}"))
}

/// The offsets of the JSON lines a replay printed.
fn offsets(out: &Output) -> Vec<i64> {
    stdout(out)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["offset"].as_i64().unwrap()
        })
        .collect()
}

/// Runs [`with_stdout_closed_after`] off the async runtime's threads.
async fn closed_after_async(args: Vec<String>, lines: usize) -> Output {
    tokio::task::spawn_blocking(move || with_stdout_closed_after(&args, lines))
        .await
        .unwrap()
}

/// `walfetch index show FILE | head -1` panicked (exit 101, `println!`
/// into a closed pipe): it stops cleanly, as replay does.
#[test]
fn a_closed_stdout_ends_index_show_cleanly() {
    let dir = temp_dir("pipe-show");
    // An index whose summary is far larger than a pipe's buffer.
    let mut big = WalIndex::new();
    for region in 0..20_000u64 {
        big.push(
            region,
            IndexEntry::offset_only(i64::try_from(region).unwrap()),
        )
        .unwrap();
    }
    let big_index = dir.join("big.idx");
    write_index_file(&big_index, &big).unwrap();
    let out = with_stdout_closed_after(&strings(&["index", "show", path(&big_index)]), 1);
    assert_clean_exit("index show", &out);
    let out = with_stdout_closed_after(
        &strings(&["index", "show", path(&big_index), "--region", "7"]),
        0,
    );
    assert_clean_exit("index show --region", &out);
}

/// dump and replay already stopped cleanly; they still do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_dump_and_replay_cleanly() {
    let dir = temp_dir("pipe-dump");
    let records: Vec<NewRecord> = (0..20_000)
        .map(|i| NewRecord::value(i, format!("record {i}")))
        .collect();
    let log = dir.join("big.log");
    std::fs::write(&log, BatchBuilder::new(0).encode(&records).unwrap().bytes).unwrap();
    let out = with_stdout_closed_after(&strings(&["dump", path(&log)]), 1);
    assert_clean_exit("dump", &out);

    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let args = strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal",
        "--strategy",
        "scan",
        "--region",
        "1",
    ]);
    let out = closed_after_async(args, 0).await;
    // replay prints its stats line on stderr whatever happened.
    assert!(out.status.success(), "replay: {}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// calibrate printed its one line with `println!`: a reader gone by then
/// made it panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_calibrate_cleanly() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    // The pipe is closed before calibrate has talked to the broker.
    let args = strings(&["calibrate", "-b", &addr, "-t", "wal", "--samples", "2"]);
    let out = closed_after_async(args, 0).await;
    assert_clean_exit("calibrate", &out);
}

/// demo printed its tables with `println!`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_demo_cleanly() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let args = strings(&["demo", "-b", &addr, "--entries", "300", "--regions", "4"]);
    let out = closed_after_async(args, 1).await;
    assert_clean_exit("demo", &out);
}

/// `walfetch calibrate --samples 4294967295` aborted on a 64 GiB
/// allocation: every count is bounded, and `--help` says the bound.
#[test]
fn counts_from_the_command_line_are_bounded() {
    for (args, bound) in [
        (
            &[
                "calibrate",
                "-b",
                "127.0.0.1:1",
                "-t",
                "wal",
                "--samples",
                "4294967295",
            ][..],
            "1..=1000",
        ),
        (
            &[
                "calibrate",
                "-b",
                "127.0.0.1:1",
                "-t",
                "wal",
                "--samples",
                "0",
            ][..],
            "1..=1000",
        ),
        (
            &["demo", "-b", "127.0.0.1:1", "--entries", "1000000000000"][..],
            "1..=200000",
        ),
        (
            &["demo", "-b", "127.0.0.1:1", "--regions", "0"][..],
            "1..=100000",
        ),
        (
            &["dump", "x.log", "--max-batch-bytes", "9999999999"][..],
            "61..=2147483647",
        ),
        (
            &[
                "replay",
                "-b",
                "127.0.0.1:1",
                "-t",
                "wal",
                "--region",
                "1",
                "--round-trip-us",
                "99999999999",
            ][..],
            "0..=60000000",
        ),
    ] {
        let out = walfetch(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(bound), "{args:?}: {}", stderr(&out));
    }
    for (command, bound) in [
        (&["calibrate", "--help"][..], "(1 to 1000)"),
        (&["demo", "--help"][..], "(1 to 200000)"),
        (&["demo", "--help"][..], "(1 to 100000)"),
        (&["dump", "--help"][..], "(61 to 2147483647)"),
        (&["replay", "--help"][..], "up to 60000000"),
    ] {
        let help = stdout(&walfetch(command));
        assert!(help.contains(bound), "{command:?}: {help}");
    }
}

/// `dump /dev/zero` grew without bound: dump reads a batch at a time and
/// refuses a length it will not hold; `index show` and `replay --index`
/// look at the header before reading on (replay read 512 MiB first). All
/// read stdin for `-`.
#[test]
fn dump_and_index_show_stop_at_once_on_what_they_cannot_hold() {
    let out = fails_within(&["dump", "/dev/zero"], Duration::from_secs(10));
    assert!(
        stderr(&out).contains("batch length 0 is below the 49-byte minimum"),
        "{}",
        stderr(&out)
    );
    let out = fails_within(&["index", "show", "/dev/zero"], Duration::from_secs(10));
    assert!(
        stderr(&out).contains("not a walfetch index file"),
        "{}",
        stderr(&out)
    );

    let out = fails_within(
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--index",
            "/dev/zero",
            "--region",
            "1",
        ],
        Duration::from_secs(10),
    );
    assert!(
        stderr(&out).contains("not a walfetch index file"),
        "{}",
        stderr(&out)
    );

    // Inputs held whole are read up to a bound, then refused.
    let out = fails_within(
        &["index", "import-greptime", "/dev/zero", "--out", "x.idx"],
        Duration::from_secs(20),
    );
    assert!(
        stderr(&out).contains("larger than 256 MiB"),
        "{}",
        stderr(&out)
    );
    let out = fails_within(
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--strategy",
            "scan",
            "--checkpoints",
            "/dev/zero",
        ],
        Duration::from_secs(20),
    );
    assert!(
        stderr(&out).contains("larger than 64 MiB"),
        "{}",
        stderr(&out)
    );

    // A header claiming a 2 GiB batch, then an endless stream: an error
    // naming the limit, at once.
    let mut head = vec![0u8; 8];
    head.extend_from_slice(&0x7fff_fff0_i32.to_be_bytes());
    head.extend_from_slice(&[0, 0, 0, 0, 2]);
    let dir = temp_dir("huge");
    let huge = dir.join("huge.log");
    std::fs::write(&huge, &head).unwrap();
    let out = fails_within(&["dump", path(&huge)], Duration::from_secs(10));
    assert!(
        stderr(&out).contains("over the") && stderr(&out).contains("--max-batch-bytes"),
        "{}",
        stderr(&out)
    );
}

/// `-` reads stdin, for dump and index show.
#[test]
fn dump_and_index_show_read_stdin() {
    let records: Vec<NewRecord> = (0..50)
        .map(|i| NewRecord::value(i, format!("record {i}")))
        .collect();
    let log = [
        BatchBuilder::new(0).encode(&records[..20]).unwrap().bytes,
        BatchBuilder::new(20).encode(&records[..30]).unwrap().bytes,
    ]
    .concat();
    let mut index = WalIndex::new();
    index.push(7, IndexEntry::offset_only(3)).unwrap();
    index.set_last_index(10);
    let dir = temp_dir("stdin");
    let index_file = dir.join("seven.idx");
    write_index_file(&index_file, &index).unwrap();
    for (args, input, want) in [
        (&["dump", "-"][..], log.clone(), "\"offset\":49"),
        (
            &["dump", "-", "--batches"][..],
            log.clone(),
            "\"position\":",
        ),
        (
            &["index", "show", "-"][..],
            std::fs::read(&index_file).unwrap(),
            "stdin: 1 regions, 1 entries, last_index 10",
        ),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains(want), "{args:?}: {}", stdout(&out));
    }
    // The second batch's header says where it is in the whole input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(["dump", "-", "--batches"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let first_len = 12 + i32::from_be_bytes(log[8..12].try_into().unwrap()) as usize;
    std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &log));
    let out = child.wait_with_output().unwrap();
    let second: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["position"], first_len);
}

/// `--strategy scan` reported `"entries": 0` for every line it printed, and
/// records past `last_index` were not counted as entries: `entries` is
/// what was printed, in all and per region, whatever the strategy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_count_what_was_printed() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("stats");
    let index = dir.join("wal.idx");
    // Indexed up to 2000 of 3000: a third of each region is past last_index.
    let out = walfetch_async(strings(&[
        "index",
        "build",
        "-b",
        &addr,
        "-t",
        "wal",
        "--out",
        path(&index),
        "--to",
        "2000",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let want = (0..BATCHES * PER_BATCH)
        .filter(|n| n % REGIONS == 3)
        .count() as u64;
    let scan = strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal",
        "--region",
        "3",
        "--strategy",
        "scan",
    ]);
    let indexed = strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal",
        "--region",
        "3",
        "--index",
        path(&index),
    ]);
    let mut trusted = indexed.clone();
    trusted.push("--trust-cut-batches".to_owned());
    let mut unverified = Vec::new();
    for args in [scan, indexed, trusted] {
        let out = walfetch_async(args.clone()).await;
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let printed = stdout(&out).lines().count() as u64;
        assert_eq!(printed, want, "{args:?}");
        let stats: serde_json::Value =
            serde_json::from_str(stderr(&out).trim().lines().last().unwrap()).unwrap();
        assert_eq!(stats["entries"], printed, "{args:?}: {stats}");
        assert_eq!(stats["yielded"], printed, "{args:?}: {stats}");
        assert_eq!(
            stats["regions"]["3"]["entries"], printed,
            "{args:?}: {stats}"
        );
        assert_eq!(
            stats["indexed_entries"].as_u64().unwrap() + stats["tail_records"].as_u64().unwrap(),
            printed,
            "{args:?}: {stats}"
        );
        unverified.push(stats["unverified_records"].as_u64().unwrap());
    }
    // These batches carry no per-record checksums: records of a cut batch
    // are used (and counted) only with --trust-cut-batches.
    assert_eq!(unverified[..2], [0, 0]);
    assert!(unverified[2] > 0, "{unverified:?}");
}

/// `--from=-5` said the range "is empty": a negative offset or partition is
/// named as such, in every command that takes one.
#[test]
fn a_negative_offset_is_named() {
    for args in [
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--region",
            "1",
            "--from=-5",
        ][..],
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--region",
            "1",
            "--from",
            "-5",
        ][..],
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--region",
            "1",
            "--to=-1",
        ][..],
        &[
            "index",
            "build",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--out",
            "x.idx",
            "--from=-5",
        ][..],
        &[
            "capture",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--out",
            "x.bin",
            "--from=-5",
        ][..],
    ] {
        let out = walfetch(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("-5 is a negative offset")
                || stderr(&out).contains("-1 is a negative offset"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    for args in [
        &[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal:-1",
            "--region",
            "1",
            "--strategy",
            "scan",
        ][..],
        &["calibrate", "-b", "127.0.0.1:1", "-t", "wal", "-p", "-1"][..],
    ] {
        let out = walfetch(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("-1 is a negative partition"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Indexes all of [`wal`] with `index build`; the index file and the
/// command's output.
async fn built_index(addr: &str, dir: &Path) -> (PathBuf, Output) {
    built_index_of(addr, dir, 0).await
}

/// [`built_index`] of partition `partition`.
async fn built_index_of(addr: &str, dir: &Path, partition: i32) -> (PathBuf, Output) {
    let index = dir.join(format!("wal-{partition}.idx"));
    let out = walfetch_async(strings(&[
        "index",
        "build",
        "-b",
        addr,
        "-t",
        "wal",
        "-p",
        &partition.to_string(),
        "--out",
        path(&index),
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    (index, out)
}

/// `index build` said `last_index Some(2999)`: no Rust debug formatting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_build_prints_last_index_as_a_number() {
    let cluster = wal().await;
    let (_, out) = built_index(&cluster.bootstrap(), &temp_dir("debug")).await;
    assert!(
        stderr(&out).contains("(last_index 2999)") && !stderr(&out).contains("Some("),
        "{}",
        stderr(&out)
    );
}

/// An I/O error was printed twice (the index error's message holds its
/// source, which the chain printed again).
#[test]
fn an_io_error_is_printed_once() {
    let out = walfetch(&["index", "show", "/nonexistent/walfetch.idx"]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).matches("No such file or directory").count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// A failed `--out` left `<out>.tmp-walfetch` behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_index_write_leaves_no_temporary_file() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("tmp-file");
    // `--out` naming a directory: the write fails, and leaves nothing.
    let target = dir.join("a-directory");
    std::fs::create_dir_all(&target).unwrap();
    let out = walfetch_async(strings(&[
        "index",
        "build",
        "-b",
        &addr,
        "-t",
        "wal",
        "--out",
        path(&target),
    ]))
    .await;
    assert!(!out.status.success());
    assert!(
        !target.with_extension("tmp-walfetch").exists(),
        "a failed index build left {}",
        target.with_extension("tmp-walfetch").display()
    );
    assert_eq!(
        stderr(&out).matches("Is a directory").count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// `index show --region` printed bare numbers: each line says what it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_show_region_lines_are_labelled() {
    let cluster = wal().await;
    let (index, _) = built_index(&cluster.bootstrap(), &temp_dir("labels")).await;
    let out = walfetch(&["index", "show", path(&index), "--region", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    let mut lines = shown.lines().skip_while(|l| !l.starts_with("region 3:"));
    assert!(
        lines.next().is_some_and(|l| l.contains("429 entries")),
        "{shown}"
    );
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with("offset 3 batch_base 0 batch_len ") && first.contains(" record_end "),
        "{shown}"
    );
    assert!(lines.all(|l| l.starts_with("offset ")), "{shown}");
}

/// `capture --from 1525` reported `1525..3000` while the file started at
/// 1550 (the broker answered from the next batch): it reports the offsets
/// the file holds, and stops at `--to`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_reports_what_it_captured() {
    let cluster = wal().await;
    let node = cluster.node_ids()[0];
    // Tansu 0.6 skips the batch holding a mid-batch fetch offset.
    cluster.set_habits(node, Habits::TANSU_0_6).unwrap();
    let addr = cluster.bootstrap();
    let dir = temp_dir("capture");
    let file = dir.join("wal.records");
    let out = walfetch_async(strings(&[
        "capture",
        "-b",
        &addr,
        "-t",
        "wal",
        "--from",
        "1525",
        "--out",
        path(&file),
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("captured offsets 1530..3000"), "{err}");
    assert!(
        err.contains("starts at offset 1530, after --from 1525"),
        "{err}"
    );
    let dumped = walfetch(&["dump", path(&file), "--batches"]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&dumped).lines().next().unwrap()).unwrap();
    assert_eq!(first["base_offset"], 1530);

    cluster.set_habits(node, Habits::default()).unwrap();
    let out = walfetch_async(strings(&[
        "capture",
        "-b",
        &addr,
        "-t",
        "wal",
        "--from",
        "1525",
        "--to",
        "1600",
        "--out",
        path(&file),
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("captured offsets 1500..1620"), "{err}");
    assert!(err.contains("before --from 1525"), "{err}");
    let dumped = walfetch(&["dump", path(&file), "--batches"]);
    assert_eq!(stdout(&dumped).lines().count(), 4);
    assert!(!file.with_extension("tmp-walfetch").exists());
}

/// Every `--help` page has an example; `--region-format` lists its choices
/// and says how they differ; `demo --help` says what it installs, leaves
/// behind and what to run next; `--strategy scan` needs no `--index`.
#[test]
fn help_pages_say_enough() {
    for command in [
        &["demo"][..],
        &["replay"][..],
        &["index", "build"][..],
        &["index", "show"][..],
        &["index", "import-greptime"][..],
        &["dump"][..],
        &["capture"][..],
        &["calibrate"][..],
    ] {
        let help = stdout(&walfetch(&[command, &["--help"]].concat()));
        assert!(help.contains("Example"), "{command:?}: {help}");
        assert!(help.contains("walfetch "), "{command:?}: {help}");
    }
    for command in [&["replay", "--help"][..], &["index", "build", "--help"][..]] {
        let help = stdout(&walfetch(command));
        assert!(
            help.contains("--region-format <REGION_FORMAT>")
                && help.contains("[possible values: be, decimal]")
                || help.contains("be:") && help.contains("decimal:"),
            "{command:?}: {help}"
        );
        assert!(
            help.contains("big-endian") && help.contains("decimal digits"),
            "{help}"
        );
    }
    let out = walfetch(&[
        "replay",
        "-b",
        "127.0.0.1:1",
        "-t",
        "wal",
        "--region",
        "1",
        "--region-format",
        "hex",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("possible values: be, decimal"),
        "{}",
        stderr(&out)
    );

    let help = stdout(&walfetch(&["demo", "--help"]));
    for want in [
        "Tansu",
        "cargo install tansu",
        "leaves behind",
        "walfetch-demo-",
        "next",
        "walfetch replay",
    ] {
        assert!(help.contains(want), "demo --help lacks {want:?}: {help}");
    }
    let help = stdout(&walfetch(&["replay", "--help"]));
    assert!(
        help.contains("none with `--strategy scan`") || help.contains("no `--index`"),
        "{help}"
    );
}

/// `replay` into a full disk: the buffered output's last write failed at
/// the final flush, and the command once exited 0 with its stats line
/// counting entries the reader never got. It fails as `dump` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_into_a_full_disk_is_an_error() {
    // Less than the output buffer holds: nothing is written before the
    // final flush.
    let cluster = ScriptedCluster::builder().brokers(1).start().await.unwrap();
    cluster.create_topic("wal", 1).unwrap();
    let records: Vec<NewRecord> = (0..10)
        .map(|i| NewRecord {
            key: Some(Bytes::copy_from_slice(&1u64.to_be_bytes())),
            ..NewRecord::value(i, format!("entry {i}"))
        })
        .collect();
    let batch = BatchBuilder::new(0).encode(&records).unwrap();
    cluster.append("wal", 0, batch.bytes).unwrap();
    let addr = cluster.bootstrap();
    let out = tokio::task::spawn_blocking(move || {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        Command::new(env!("CARGO_BIN_EXE_walfetch"))
            .args(["replay", "-b", &addr, "-t", "wal", "--strategy", "scan"])
            .args(["--region", "1"])
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("No space left"), "{}", stderr(&out));
    // The stats line is still printed, last, and names the error.
    let stats = stats_line(&out);
    assert!(
        stats["error"].as_str().unwrap().contains("No space left"),
        "{stats}"
    );
}

/// stdout and stderr into one pipe whose reader goes after a line
/// (`replay … 2>&1 | head -1`): the stats line then went to a closed
/// stderr, and `eprintln!` panicked (exit 101). It ends cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_holding_stderr_too_ends_replay_cleanly() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let script = format!(
        "{} replay -b {addr} -t wal --strategy scan --region 1 2>&1 | head -1 >/dev/null; \
         echo \"status ${{PIPESTATUS[0]}}\"",
        env!("CARGO_BIN_EXE_walfetch")
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash").arg("-c").arg(script).output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        stdout(&out).contains("status 0"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// `--region 3` given twice (as a script that adds `--region $r` for each
/// region it finds easily does) replayed region 3 from `--from` (0), not
/// from its checkpoint: the first copy took the checkpoint out of the map
/// and the second fell back to `--from`, duplicating entries the region had
/// already flushed. A region given twice is one region, from its checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_given_twice_is_replayed_once_from_its_checkpoint() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("region-twice");
    let (index, _) = built_index(&addr, &dir).await;
    let checkpoints = dir.join("checkpoints.json");
    std::fs::write(&checkpoints, r#"{"3": 1500}"#).unwrap();
    let replay = |regions: &[&str]| {
        let mut args = strings(&[
            "replay",
            "-b",
            &addr,
            "-t",
            "wal",
            "--index",
            path(&index),
            "--checkpoints",
            path(&checkpoints),
        ]);
        for r in regions {
            args.extend(strings(&["--region", r]));
        }
        walfetch_async(args)
    };
    let want: Vec<i64> = (1500..BATCHES * PER_BATCH)
        .filter(|n| n % REGIONS == 3)
        .collect();
    for regions in [&["3"][..], &["3", "3"], &["3", "4", "3"]] {
        let out = replay(regions).await;
        assert!(out.status.success(), "{regions:?}: {}", stderr(&out));
        let got: Vec<i64> = offsets(&out)
            .into_iter()
            .filter(|n| n % REGIONS == 3)
            .collect();
        assert_eq!(got, want, "{regions:?}: region 3 from its checkpoint, once");
    }
}

/// A checkpoints file with two checkpoints for one region (`"3"` and
/// `"03"`, or the key `"3"` twice) was read as one of them, silently: the
/// wrong one loses entries or replays them twice. It is refused, naming
/// the region and both offsets, before connecting. An empty file was said
/// to be missing ("give --region R or --checkpoints FILE").
#[test]
fn a_checkpoints_file_with_two_checkpoints_for_a_region_is_refused() {
    let dir = temp_dir("checkpoints-conflict");
    let index = dir.join("empty.idx");
    write_index_file(&index, &WalIndex::new()).unwrap();
    let file = dir.join("checkpoints.json");
    // Port 1: a file that is refused fails before connecting; one that is
    // accepted fails to connect, naming the address.
    let replay = |text: &str| {
        std::fs::write(&file, text).unwrap();
        walfetch(&[
            "replay",
            "-b",
            "127.0.0.1:1",
            "-t",
            "wal",
            "--index",
            path(&index),
            "--checkpoints",
            path(&file),
            "--timeout",
            "1s",
        ])
    };
    for (text, first, second) in [
        (
            r#"{"3": 100, "03": 2000}"#,
            "100 (as \"3\")",
            "2000 (as \"03\")",
        ),
        (
            r#"{"3": 100, "3": 2000}"#,
            "100 (as \"3\")",
            "2000 (as \"3\")",
        ),
    ] {
        let out = replay(text);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("region 3 has two checkpoints")
                && err.contains(first)
                && err.contains(second)
                && !err.contains("127.0.0.1:1"),
            "{text}: {err}"
        );
    }
    // The same checkpoint twice is no conflict: the file is accepted.
    let out = replay(r#"{"3": 100, "03": 100}"#);
    assert!(stderr(&out).contains("127.0.0.1:1"), "{}", stderr(&out));
    let out = replay("{}");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the checkpoints file lists no regions"),
        "{}",
        stderr(&out)
    );
}

/// A replay that fails part way (indexed offsets removed by retention)
/// printed its error after the stats line, so the last line on stderr was
/// not the stats line docs/cli.md promises; and the stats listed one lost
/// offset where the error named all 214. The error comes first, then the
/// stats line, which names the error and lists the same lost offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_line_is_last_when_a_replay_fails_part_way() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("fails-part-way");
    let (index, _) = built_index(&addr, &dir).await;
    cluster.advance_log_start("wal", 0, 1500).unwrap();
    let out = walfetch_async(strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal",
        "--index",
        path(&index),
        "--region",
        "3",
    ]))
    .await;
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    let stats = stats_line(&out);
    let lost: Vec<i64> = (0..1500).filter(|n| n % REGIONS == 3).collect();
    let error = stats["error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "{} indexed offset(s) of region 3 no longer exist",
            lost.len()
        )),
        "{stats}"
    );
    assert!(
        err.contains(&format!("walfetch: error: {error}\n")),
        "{err}"
    );
    assert_eq!(stats["lost"], serde_json::json!(lost), "{stats}");
    assert_eq!(stats["regions"]["3"]["lost"], serde_json::json!(lost));
    // A replay that ends well says so too.
    let out = walfetch_async(strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal",
        "--index",
        path(&index),
        "--region",
        "3",
        "--from",
        "1500",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stats_line(&out)["error"], serde_json::Value::Null);
}

/// A recovery that lost millions of indexed offsets under `--skip-lost`
/// printed each of them in `lost`, and again in its region's `lost`: a
/// stats line of tens of megabytes. The lists now hold at most 1000
/// offsets (the lowest), `lost_count` says how many there were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_line_lists_a_bounded_number_of_lost_offsets() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("many-lost");
    let (index, _) = built_index(&addr, &dir).await;
    cluster.advance_log_start("wal", 0, 2990).unwrap();
    let mut args = strings(&["replay", "-b", &addr, "-t", "wal", "--index", path(&index)]);
    for region in 0..REGIONS {
        args.extend(strings(&["--region", &region.to_string()]));
    }
    args.push("--skip-lost".into());
    let out = walfetch_async(args).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let stats = stats_line(&out);
    assert_eq!(stats["lost_count"], 2990, "{stats}");
    let listed: Vec<i64> = (0..1000).collect();
    assert_eq!(stats["lost"], serde_json::json!(listed));
    // The regions' lists share one bound; each region's count is whole.
    let regions = stats["regions"].as_object().unwrap();
    let counted: u64 = regions
        .values()
        .map(|r| r["lost_count"].as_u64().unwrap())
        .sum();
    let listed: usize = regions
        .values()
        .map(|r| r["lost"].as_array().unwrap().len())
        .sum();
    assert_eq!(counted, 2990);
    assert_eq!(listed, 1000, "{stats}");
    assert_eq!(
        regions["0"]["lost"],
        serde_json::json!((0..2990).filter(|n| n % REGIONS == 0).collect::<Vec<_>>())
    );
}

/// Over two partitions, each losing the same offsets, `lost` listed every
/// offset twice, with nothing to say which partition's each one was. It
/// lists each offset once; `partitions` says which partition lost what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_line_lists_each_lost_offset_once_and_by_partition() {
    let cluster = wal_of(2).await;
    let addr = cluster.bootstrap();
    let dir = temp_dir("lost-twice");
    let (index0, _) = built_index_of(&addr, &dir, 0).await;
    let (index1, _) = built_index_of(&addr, &dir, 1).await;
    cluster.advance_log_start("wal", 0, 1500).unwrap();
    cluster.advance_log_start("wal", 1, 1500).unwrap();
    let out = walfetch_async(strings(&[
        "replay",
        "-b",
        &addr,
        "-t",
        "wal:0",
        "-t",
        "wal:1",
        "--index",
        path(&index0),
        "--index",
        path(&index1),
        "--region",
        "3",
        "--skip-lost",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let stats = stats_line(&out);
    let lost: Vec<i64> = (0..1500).filter(|n| n % REGIONS == 3).collect();
    assert_eq!(stats["lost"], serde_json::json!(lost), "{stats}");
    assert_eq!(stats["lost_count"], 2 * lost.len(), "{stats}");
    assert_eq!(stats["regions"]["3"]["lost"], serde_json::json!(lost));
    assert_eq!(stats["regions"]["3"]["lost_count"], 2 * lost.len());
    for p in ["wal:0", "wal:1"] {
        assert_eq!(
            stats["partitions"][p]["lost"],
            serde_json::json!(lost),
            "{stats}"
        );
        assert_eq!(stats["partitions"][p]["lost_count"], lost.len());
    }
}

/// stdin can be read once: `--index -` given for two partitions read the
/// index for the first and nothing for the second, which failed as "not a
/// walfetch index file". It is refused, saying why.
#[test]
fn stdin_given_twice_is_refused() {
    let dir = temp_dir("stdin-twice");
    let index = dir.join("wal.idx");
    write_index_file(&index, &WalIndex::new()).unwrap();
    let bytes = std::fs::read(&index).unwrap();
    for extra in [
        &[
            "-t", "wal:0", "-t", "wal:1", "--index", "-", "--index", "-", "--region", "1",
        ][..],
        &["-t", "wal:0", "--index", "-", "--checkpoints", "-"][..],
        &["-t", "wal:0", "--index", "-", "-F", "/dev/stdin"][..],
        &[
            "-t",
            "wal:0",
            "--index",
            "/dev/stdin",
            "--region",
            "1",
            "-F",
            "/dev/fd/0",
        ][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
            .args(["replay", "-b", "127.0.0.1:1"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // The command may refuse before it reads: a closed pipe is fine.
        let _ = std::io::Write::write_all(&mut stdin, &bytes);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{extra:?}: {err}");
        assert!(
            err.contains("stdin can be read once") && !err.contains("127.0.0.1:1"),
            "{extra:?}: {err}"
        );
    }
}

/// `-F` was read once for the isolation level and again to connect: a
/// properties file that can be read once (`-F /dev/stdin`, `-F <(…)`)
/// gave its settings to the first and nothing to the second, and the
/// replay connected without the SASL it asked for. It is read once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_properties_file_is_read_once() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
            .args([
                "replay", "-b", &addr, "-t", "wal", "--strategy", "scan", "--region", "1", "-F",
                "/dev/stdin", "--timeout", "5s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(
            &mut stdin,
            b"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n",
        )
        .unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let err = stderr(&out);
    // The scripted broker speaks no SASL: asked for, connecting fails.
    assert!(!out.status.success(), "{err}");
    assert!(err.to_lowercase().contains("sasl"), "{err}");
    assert!(stdout(&out).is_empty());
}

/// Ctrl-C killed a replay where it stood: the JSON line it was writing
/// was cut, no stats line was printed, and the shell saw a death by
/// signal. It ends the output at a line boundary, prints the stats line
/// naming the interruption, and exits 130 (128 + SIGINT) as shells do.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_replay_at_a_line_with_its_stats() {
    use std::io::Read as _;
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let out = tokio::task::spawn_blocking(move || {
        let mut args = strings(&["replay", "-b", &addr, "-t", "wal", "--strategy", "scan"]);
        for region in 0..REGIONS {
            args.extend(strings(&["--region", &region.to_string()]));
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_walfetch"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        // The replay is writing (its output, far more than a pipe holds,
        // fills the pipe and waits for this reader): interrupt it there.
        let mut first = [0u8; 100];
        stdout.read_exact(&mut first).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let killed = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        std::thread::sleep(Duration::from_millis(300));
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).unwrap();
        let mut printed = first.to_vec();
        printed.extend(rest);
        let out = child.wait_with_output().unwrap();
        (printed, out)
    })
    .await
    .unwrap();
    let (printed, out) = out;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{:?}: {err}", out.status);
    let text = String::from_utf8(printed).unwrap();
    assert!(
        text.ends_with('\n'),
        "the output ends inside a line: {:?}",
        &text[text.len().saturating_sub(80)..]
    );
    let lines = text.lines().count();
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    assert!(
        lines < (PER_BATCH * BATCHES) as usize,
        "{lines} lines: not interrupted"
    );
    let stats = stats_line(&out);
    assert!(
        stats["error"].as_str().unwrap().contains("interrupted"),
        "{stats}"
    );
    assert_eq!(stats["entries"], lines, "{stats}");
}
