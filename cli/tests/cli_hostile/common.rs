//! The scripted WAL the commands read, running the CLI (with its stdout closed, within a limit) and reading its output.

pub(crate) use std::io::{BufRead, BufReader};
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::process::{Command, Output, Stdio};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use bytes::Bytes;
pub(crate) use walfetch::codec::{BatchBuilder, NewRecord};
pub(crate) use walfetch::index::{write_index_file, IndexEntry, WalIndex};
pub(crate) use walfetch_support::cli::{
    path, stats_line, stderr, stdout, strings, temp_dir, words, Cli,
};
pub(crate) use walfetch_testkit::{Habits, ScriptedCluster};

/// The `walfetch` binary these tests run.
pub(crate) const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// Records per batch of [`wal`]'s partition.
pub(crate) const PER_BATCH: i64 = 30;
/// Batches of [`wal`]'s partition.
pub(crate) const BATCHES: i64 = 100;
/// Regions of [`wal`]'s partition: record `n` is region `n % REGIONS`.
pub(crate) const REGIONS: i64 = 7;

/// A one-broker scripted cluster with topic `wal`, partition 0:
/// [`BATCHES`] batches of [`PER_BATCH`] records, keyed by region (8-byte
/// big-endian), valued `entry <n> region <r>`.
pub(crate) async fn wal() -> ScriptedCluster {
    wal_of(1).await
}

/// [`wal`] with `partitions` partitions, each holding the same records.
pub(crate) async fn wal_of(partitions: i32) -> ScriptedCluster {
    let cluster = ScriptedCluster::builder().brokers(1).start().await.unwrap();
    cluster.create_topic("wal", partitions).unwrap();
    for partition in 0..partitions {
        fill(&cluster, partition);
    }
    cluster
}

/// Appends [`wal`]'s records to `partition`.
pub(crate) fn fill(cluster: &ScriptedCluster, partition: i32) {
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

/// Runs a command whose reader goes away: after `lines` lines of stdout
/// (0: before the command writes anything), the pipe is closed. Returns
/// the exit status and stderr.
pub(crate) fn with_stdout_closed_after(args: &[String], lines: usize) -> Output {
    let mut child = WALFETCH.spawn(args, Stdio::piped());
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
pub(crate) fn assert_clean_exit(what: &str, out: &Output) {
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
pub(crate) fn fails_within(args: &[&str], limit: Duration) -> Output {
    let mut child = WALFETCH.spawn(args, Stdio::null());
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

/// The offsets of the JSON lines a replay printed.
pub(crate) fn offsets(out: &Output) -> Vec<i64> {
    stdout(out)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["offset"].as_i64().unwrap()
        })
        .collect()
}

/// Runs [`with_stdout_closed_after`] off the async runtime's threads.
pub(crate) async fn closed_after_async(args: Vec<String>, lines: usize) -> Output {
    tokio::task::spawn_blocking(move || with_stdout_closed_after(&args, lines))
        .await
        .unwrap()
}

/// A fresh [`wal`] indexed whole by `index build`.
pub(crate) struct IndexedWal {
    /// The scripted cluster (the WAL lives as long as it does).
    pub(crate) cluster: ScriptedCluster,
    /// Its bootstrap address.
    pub(crate) addr: String,
    /// The test's directory, holding the index.
    pub(crate) dir: PathBuf,
    /// The index file.
    pub(crate) index: PathBuf,
}

/// An [`IndexedWal`] whose directory is [`temp_dir`]`(name)`.
pub(crate) async fn indexed_wal(name: &str) -> IndexedWal {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let dir = temp_dir(name);
    let (index, _) = built_index(&addr, &dir).await;
    IndexedWal {
        cluster,
        addr,
        dir,
        index,
    }
}

/// Indexes all of [`wal`] with `index build`; the index file and the
/// command's output.
pub(crate) async fn built_index(addr: &str, dir: &Path) -> (PathBuf, Output) {
    built_index_of(addr, dir, 0).await
}

/// [`built_index`] of partition `partition`.
pub(crate) async fn built_index_of(addr: &str, dir: &Path, partition: i32) -> (PathBuf, Output) {
    let index = dir.join(format!("wal-{partition}.idx"));
    let out = WALFETCH
        .index_build_async(addr, "wal", &index, &["-p", &partition.to_string()])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    (index, out)
}

/// `walfetch replay -b ADDR -t wal --index INDEX --region REGION` and
/// `extra`, run on a thread of its own.
pub(crate) async fn replay_wal(addr: &str, index: &Path, region: &str, extra: &[&str]) -> Output {
    WALFETCH
        .replay_region_async(addr, "wal", index, region, extra)
        .await
}
