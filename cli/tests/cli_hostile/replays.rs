//! Replays: a region given twice replayed once, a properties file read once, Ctrl-C ending at a line with its stats.

use crate::common::*;

/// `--region 3` given twice (as a script that adds `--region $r` for each
/// region it finds easily does) replayed region 3 from `--from` (0), not
/// from its checkpoint: the first copy took the checkpoint out of the map
/// and the second fell back to `--from`, duplicating entries the region had
/// already flushed. A region given twice is one region, from its checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_given_twice_is_replayed_once_from_its_checkpoint() {
    let IndexedWal {
        cluster: _cluster,
        addr,
        dir,
        index,
    } = indexed_wal("region-twice").await;
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
        WALFETCH.run_async(args)
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

/// `-F` was read once for the isolation level and again to connect: a
/// properties file that can be read once (`-F /dev/stdin`, `-F <(…)`)
/// gave its settings to the first and nothing to the second, and the
/// replay connected without the SASL it asked for. It is read once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_properties_file_is_read_once() {
    let cluster = wal().await;
    let addr = cluster.bootstrap();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = WALFETCH.spawn_piped(&[
                "replay", "-b", &addr, "-t", "wal", "--strategy", "scan", "--region", "1", "-F",
                "/dev/stdin", "--timeout", "5s",
            ]);
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
        let mut child = WALFETCH.spawn(&args, Stdio::piped());
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
