//! The stats line: it counts what was printed, comes last when a replay fails, lists lost offsets bounded and once.

use crate::common::*;

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
    let out = WALFETCH
        .index_build_async(&addr, "wal", &index, &["--to", "2000"])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let want = (0..BATCHES * PER_BATCH)
        .filter(|n| n % REGIONS == 3)
        .count() as u64;
    let replay = format!("replay -b {addr} -t wal --region 3");
    let scan = format!("{replay} --strategy scan");
    let indexed = format!("{replay} --index {}", path(&index));
    let trusted = format!("{indexed} --trust-cut-batches");
    let mut unverified = Vec::new();
    for args in [scan, indexed, trusted] {
        let out = WALFETCH.run_async(strings(&words(&args))).await;
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let printed = stdout(&out).lines().count() as u64;
        assert_eq!(printed, want, "{args:?}");
        let stats = stats_line(&out);
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

/// A replay that fails part way (indexed offsets removed by retention)
/// printed its error after the stats line, so the last line on stderr was
/// not the stats line docs/cli.md promises; and the stats listed one lost
/// offset where the error named all 214. The error comes first, then the
/// stats line, which names the error and lists the same lost offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_line_is_last_when_a_replay_fails_part_way() {
    let IndexedWal {
        cluster,
        addr,
        index,
        ..
    } = indexed_wal("fails-part-way").await;
    cluster.advance_log_start("wal", 0, 1500).unwrap();
    let out = replay_wal(&addr, &index, "3", &[]).await;
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
    let out = replay_wal(&addr, &index, "3", &["--from", "1500"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stats_line(&out)["error"], serde_json::Value::Null);
}

/// A recovery that lost millions of indexed offsets under `--skip-lost`
/// printed each of them in `lost`, and again in its region's `lost`: a
/// stats line of tens of megabytes. The lists now hold at most 1000
/// offsets (the lowest), `lost_count` says how many there were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_line_lists_a_bounded_number_of_lost_offsets() {
    let IndexedWal {
        cluster,
        addr,
        index,
        ..
    } = indexed_wal("many-lost").await;
    cluster.advance_log_start("wal", 0, 2990).unwrap();
    let mut args = strings(&["replay", "-b", &addr, "-t", "wal", "--index", path(&index)]);
    for region in 0..REGIONS {
        args.extend(strings(&["--region", &region.to_string()]));
    }
    args.push("--skip-lost".into());
    let out = WALFETCH.run_async(args).await;
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
    let out = WALFETCH
        .run_async(strings(&[
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
