//! `walfetch demo` with no broker given: it runs on its embedded
//! Kafka-rules broker, writes GreptimeDB's layout, and says so.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn the_demo_runs_on_its_embedded_broker_with_nothing_installed() {
    let out = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(["demo", "--entries", "400", "--regions", "8"])
        // No Tansu to be found: the default must not need one.
        .env("PATH", "/nonexistent")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("broker: embedded"), "{stdout}");
    assert!(
        stdout.contains("one region per batch (GreptimeDB's layout), lz4"),
        "{stdout}"
    );
    assert!(stdout.contains("link: "), "{stdout}");
    assert!(stdout.contains("| walfetch, one pass"), "{stdout}");
    // GreptimeDB's own restart: its regions 16 at a time, each checked.
    assert!(
        stdout.contains("| estimate + back-off, 16 at once"),
        "{stdout}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args([
            "demo",
            "--entries",
            "400",
            "--regions",
            "8",
            "--layout",
            "interleaved",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("regions interleaved in every batch"),
        "{stdout}"
    );
}

/// `demo --region 99` with 4 regions wrote the whole WAL (with -b, a topic
/// left on the user's cluster) before saying region 99 had no entries: a
/// region the demo will not write is refused before anything is started.
#[test]
fn a_region_the_demo_will_not_write_is_refused_up_front() {
    let out = Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args([
            "demo",
            "--entries",
            "200",
            "--regions",
            "4",
            "--region",
            "99",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.is_empty() && stderr.contains("--region 99: the demo writes regions 0 to 3"),
        "{stdout}{stderr}"
    );
}
