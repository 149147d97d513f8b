//! librdkafka, the independent client some tests check walfetch and the
//! testkit against: the confluent-kafka Python package the fixtures in
//! `scripts/fixtures/` run on.

use std::process::Command;

/// Panics, with the install command, unless `python3` can import
/// confluent-kafka: a test that needs librdkafka never passes by skipping.
pub fn require_confluent_kafka() {
    let probe = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "this test needs python3 with confluent-kafka: `scripts/setup-python.sh` installs the \
         pinned version (scripts/test.sh runs it)"
    );
}
