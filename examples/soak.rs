//! The long fault soak: `cargo run --release --example soak -- --faults 10000
//! [--seed N]` runs the seeded randomized soak of `support/src/soak/mod.rs`
//! against the scripted broker until that many faults fired, and prints its
//! counts as one JSON object (faults by kind, replays, entries checked,
//! errors by kind, peak memory). Exits 1 if an invariant was violated.
#![allow(clippy::unwrap_used)]

use walfetch_support::soak;

mod common;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut config = soak::SoakConfig {
        faults: 10_000,
        ..soak::SoakConfig::default()
    };
    common::numeric_flags("soak [--faults N] [--seed N]", |flag, n| {
        match flag {
            "--faults" => config.faults = n,
            "--seed" => config.seed = n,
            _ => return false,
        }
        true
    });
    let report = soak::run(config).await;
    common::report(&report.to_json(), !report.violations.is_empty());
}
