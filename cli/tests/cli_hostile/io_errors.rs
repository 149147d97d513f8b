//! I/O errors: printed once, no temporary file left, a full disk an error.

use crate::common::*;

/// An I/O error was printed twice (the index error's message holds its
/// source, which the chain printed again).
#[test]
fn an_io_error_is_printed_once() {
    let out = WALFETCH.run(&["index", "show", "/nonexistent/walfetch.idx"]);
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
    let out = WALFETCH.index_build_async(&addr, "wal", &target, &[]).await;
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
        let args = format!("replay -b {addr} -t wal --strategy scan --region 1");
        WALFETCH
            .spawn(&words(&args), full.into())
            .wait_with_output()
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
