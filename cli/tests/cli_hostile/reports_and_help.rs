//! What the commands report: the last index as a number, labelled region lines, what capture captured, help pages.

use crate::common::*;

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

/// `index show --region` printed bare numbers: each line says what it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_show_region_lines_are_labelled() {
    let cluster = wal().await;
    let (index, _) = built_index(&cluster.bootstrap(), &temp_dir("labels")).await;
    let out = WALFETCH.run(&["index", "show", path(&index), "--region", "3"]);
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
    let err = capture_ok(&addr, &file, &["--from", "1525"]).await;
    assert!(err.contains("captured offsets 1530..3000"), "{err}");
    assert!(
        err.contains("starts at offset 1530, after --from 1525"),
        "{err}"
    );
    let dumped = WALFETCH.run(&["dump", path(&file), "--batches"]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&dumped).lines().next().unwrap()).unwrap();
    assert_eq!(first["base_offset"], 1530);

    cluster.set_habits(node, Habits::default()).unwrap();
    let err = capture_ok(&addr, &file, &["--from", "1525", "--to", "1600"]).await;
    assert!(err.contains("captured offsets 1500..1620"), "{err}");
    assert!(err.contains("before --from 1525"), "{err}");
    let dumped = WALFETCH.run(&["dump", path(&file), "--batches"]);
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
        let help = stdout(&WALFETCH.run(&[command, &["--help"]].concat()));
        assert!(help.contains("Example"), "{command:?}: {help}");
        assert!(help.contains("walfetch "), "{command:?}: {help}");
    }
    for command in [&["replay", "--help"][..], &["index", "build", "--help"][..]] {
        let help = stdout(&WALFETCH.run(command));
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
    let out = WALFETCH.run(&[
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

    let help = stdout(&WALFETCH.run(&["demo", "--help"]));
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
    let help = stdout(&WALFETCH.run(&["replay", "--help"]));
    assert!(
        help.contains("none with `--strategy scan`") || help.contains("no `--index`"),
        "{help}"
    );
}

/// `walfetch capture -b ADDR -t wal`, `extra` and `--out FILE`, expecting
/// success; its stderr.
async fn capture_ok(addr: &str, file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["capture", "-b", addr, "-t", "wal"];
    args.extend_from_slice(extra);
    args.extend(["--out", path(file)]);
    let out = WALFETCH.run_async(strings(&args)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}
