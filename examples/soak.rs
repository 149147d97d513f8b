//! The long fault soak: `cargo run --release --example soak -- --faults 10000
//! [--seed N]` runs the seeded randomized soak of `tests/soak/mod.rs`
//! against the scripted broker until that many faults fired, and prints its
//! counts as one JSON object (faults by kind, replays, entries checked,
//! errors by kind, peak memory). Exits 1 if an invariant was violated.
#![allow(clippy::unwrap_used)]

#[path = "../tests/soak/mod.rs"]
mod soak;

fn main() {
    let mut config = soak::SoakConfig {
        faults: 10_000,
        ..soak::SoakConfig::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--faults", Some(n)) => config.faults = n,
            ("--seed", Some(n)) => config.seed = n,
            _ => {
                eprintln!("usage: soak [--faults N] [--seed N]");
                std::process::exit(2);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("tokio runtime: {e}");
            std::process::exit(2);
        });
    let report = runtime.block_on(soak::run(config));
    println!(
        "{}",
        serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
    );
    if !report.violations.is_empty() {
        std::process::exit(1);
    }
}
