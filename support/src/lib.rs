//! What walfetch's integration tests (`tests/`), command-line tests
//! (`cli/tests/`), examples and benches share: the real brokers they run on,
//! the scripted broker's worlds, WALs written and read back, recoveries run
//! and checked. A dev-only crate: nothing here is published.
#![allow(clippy::unwrap_used)]

pub mod broker;
pub mod cli;
pub mod failover;
pub mod greptime;
pub mod kafka;
pub mod leader;
pub mod librdkafka;
pub mod partition_log;
pub mod produce;
pub mod recovery;
pub mod scripted;
pub mod security;
pub mod sim;
pub mod soak;
pub mod stunnel;
pub mod tansu;
pub mod transactions;
pub mod wal_log;
pub mod writers;

pub use produce::{batch_offsets, latest_offset, produce_batches, sample_records, EVERY_CODEC};

/// A directory of this test process (created if missing), `name` telling
/// its users apart: `walfetch-<pid>-<name>` under the system's temporary
/// directory.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("walfetch-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}
