//! A closed stdout (or a closed pipe holding stderr too) ends every command cleanly.

use crate::common::*;

/// Runs the command `line`, its `ADDR` the address of a fresh [`wal`], with
/// its stdout closed after `lines` lines (see [`with_stdout_closed_after`]).
async fn closed_on_the_wal(line: &str, lines: usize) -> Output {
    let cluster = wal().await;
    let args = strings(&words(&line.replace("ADDR", &cluster.bootstrap())));
    closed_after_async(args, lines).await
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

    let out = closed_on_the_wal("replay -b ADDR -t wal --strategy scan --region 1", 0).await;
    // replay prints its stats line on stderr whatever happened.
    assert!(out.status.success(), "replay: {}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// calibrate printed its one line with `println!`: a reader gone by then
/// made it panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_calibrate_cleanly() {
    // The pipe is closed before calibrate has talked to the broker.
    let out = closed_on_the_wal("calibrate -b ADDR -t wal --samples 2", 0).await;
    assert_clean_exit("calibrate", &out);
}

/// demo printed its tables with `println!`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_demo_cleanly() {
    let out = closed_on_the_wal("demo -b ADDR --entries 300 --regions 4", 1).await;
    assert_clean_exit("demo", &out);
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
