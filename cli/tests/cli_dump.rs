//! `walfetch dump`: the records of a file of raw batches as JSON lines.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;
use walfetch::codec::{BatchBuilder, Compression, ControlType, NewRecord};
use walfetch_support::cli::{self, stderr, stdout, temp_dir, Cli};

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

fn sample_log() -> Vec<u8> {
    let first = BatchBuilder::new(0)
        .encode(&[
            NewRecord {
                timestamp: 1000,
                key: Some(Bytes::from_static(b"k0")),
                value: Some(Bytes::from_static(b"v0")),
                headers: vec![
                    (
                        Bytes::from_static(b"region"),
                        Some(Bytes::from_static(b"7")),
                    ),
                    (Bytes::from_static(b"n"), None),
                ],
                offset_delta: 0,
            },
            NewRecord {
                timestamp: 1001,
                ..NewRecord::value(1, "v1")
            },
        ])
        .unwrap();
    let second = BatchBuilder::new(2)
        .compression(Compression::Zstd)
        .encode(&[NewRecord {
            timestamp: 1002,
            key: None,
            value: None,
            headers: vec![],
            offset_delta: 0,
        }])
        .unwrap();
    let marker = BatchBuilder::new(3)
        .producer(9, 0, 0)
        .encode_marker(ControlType::Commit, 1, 1003)
        .unwrap();
    [first.bytes, second.bytes, marker.bytes].concat()
}

/// `walfetch dump PATH` and `extra`.
fn dump(path: &Path, extra: &[&str]) -> Output {
    WALFETCH.run(&[&["dump", cli::path(path)][..], extra].concat())
}

/// The JSON lines a command printed.
fn lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// The records `walfetch dump PATH` printed, the command having succeeded.
fn dumped(path: &Path) -> Vec<Value> {
    let out = dump(path, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    lines(&out)
}

/// A file `name` holding `data`, in this process's temporary directory.
fn temp_file(name: &str, data: &[u8]) -> PathBuf {
    let path = temp_dir("dump").join(name);
    std::fs::write(&path, data).unwrap();
    path
}

#[test]
fn prints_one_json_object_per_record() {
    let path = temp_file("ok.log", &sample_log());
    let got = dumped(&path);
    let b64 = |s: &str| Value::String(BASE64.encode(s));
    assert_eq!(
        got,
        vec![
            serde_json::json!({"offset": 0, "timestamp": 1000, "key": b64("k0"), "value": b64("v0"),
                               "headers": [[b64("region"), b64("7")], [b64("n"), null]]}),
            serde_json::json!({"offset": 1, "timestamp": 1001, "key": null, "value": b64("v1"), "headers": []}),
            serde_json::json!({"offset": 2, "timestamp": 1002, "key": null, "value": null, "headers": []}),
        ],
        "the control record is not printed as data"
    );
}

/// Header keys are bytes on the wire (librdkafka and the Java client write
/// any): printed as text (lossily), two keys that are not UTF-8 printed the
/// same, and their bytes were gone. They are base64, as keys and values are.
#[test]
fn binary_header_keys_are_printed_apart() {
    let batch = BatchBuilder::new(0)
        .encode(&[NewRecord {
            offset_delta: 0,
            timestamp: 1,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: vec![
                (Bytes::from_static(&[0xff]), Some(Bytes::from_static(b"a"))),
                (Bytes::from_static(&[0xfe]), Some(Bytes::from_static(b"b"))),
            ],
        }])
        .unwrap();
    let path = temp_file("binary-header-keys.log", &batch.bytes);
    let got = dumped(&path);
    let b64 = |b: &[u8]| Value::String(BASE64.encode(b));
    assert_eq!(
        got[0]["headers"],
        serde_json::json!([[b64(&[0xff]), b64(b"a")], [b64(&[0xfe]), b64(b"b")]]),
        "{}",
        got[0]
    );
}

#[test]
fn batches_mode_prints_headers() {
    let path = temp_file("batches.log", &sample_log());
    let out = dump(&path, &["--batches"]);
    assert!(out.status.success());
    let got = lines(&out);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1]["compression"], "zstd");
    assert_eq!(got[1]["base_offset"], 2);
    assert_eq!(got[2]["control"], true);
    assert_eq!(got[2]["control_type"], 1);
    assert_eq!(got[2]["producer_id"], 9);
    assert_eq!(got[0]["record_count"], 2);
}

#[test]
fn a_partial_trailing_batch_is_a_note_not_an_error() {
    let log = sample_log();
    let path = temp_file("partial.log", &log[..log.len() - 5]);
    let out = dump(&path, &[]);
    assert!(out.status.success());
    assert_eq!(lines(&out).len(), 3);
    let err = stderr(&out);
    assert!(
        err.contains("partial batch") && err.contains("base offset 3"),
        "{err}"
    );
}

#[test]
fn a_corrupt_batch_fails_after_printing_what_came_before() {
    let mut log = sample_log();
    let first_len = 12 + i32::from_be_bytes(log[8..12].try_into().unwrap()) as usize;
    log[first_len + 70] ^= 0xff; // inside the second batch's records
    let path = temp_file("corrupt.log", &log);
    let out = dump(&path, &[]);
    assert!(!out.status.success());
    assert_eq!(
        lines(&out).len(),
        2,
        "the first batch's records are printed"
    );
    let err = stderr(&out);
    assert!(
        err.contains("offset 2") && err.contains(&format!("byte {first_len}")),
        "{err}"
    );
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = dump(Path::new("/nonexistent/walfetch.log"), &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/nonexistent/walfetch.log"));
}
