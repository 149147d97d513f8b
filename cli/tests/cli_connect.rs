//! The CLI against brokers it cannot reach (issue #11): a closed port
//! written as Tansu writes it (`tcp://host:port`) and a malformed address
//! end the command quickly with a message that says which, not after the
//! 30 s deadline.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::Output;
use std::time::{Duration, Instant};

use walfetch_support::cli::{stderr, Cli};

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `walfetch replay` of region 1 of `wal:0` by a scan, from `brokers`; what
/// it printed and how long it took.
fn replay_from(brokers: &str) -> (Output, Duration) {
    let started = Instant::now();
    let out = WALFETCH.run(&[
        "replay",
        "-b",
        brokers,
        "-t",
        "wal:0",
        "--strategy",
        "scan",
        "--region",
        "1",
    ]);
    (out, started.elapsed())
}

#[test]
fn replay_from_a_closed_port_fails_quickly_saying_refused() {
    let port = closed_port();
    let brokers = format!("tcp://127.0.0.1:{port}");
    let (out, elapsed) = replay_from(&brokers);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    // Before: 28.6 s (23 retries of a name lookup of "tcp").
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}: {err}");
    assert!(
        err.contains(&format!("broker 127.0.0.1:{port} refused the connection")),
        "{err}"
    );
    assert!(err.contains("nothing listens on that port"), "{err}");
}

#[test]
fn replay_with_a_malformed_address_fails_at_once_naming_it() {
    let (out, elapsed) = replay_from("127.0.0.1:99999");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}: {err}");
    assert!(
        err.contains(
            "broker address \"127.0.0.1:99999\": port \"99999\" is not a number from 1 to 65535"
        ),
        "{err}"
    );
}
