#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this script).
# Installs what it needs first: Apache Kafka (the first test broker, jars from
# Maven Central into ~/.cache/walfetch), the Tansu test broker and the Python packages
# of the interop tests (confluent-kafka, which bundles librdkafka, and
# kafka-python; pinned in scripts/requirements-test.txt), each skipped when
# its pinned version is already installed, and cargo-fuzz, skipped when
# present.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "setup: test brokers (Apache Kafka, Tansu), librdkafka and kafka-python"
scripts/setup-kafka.sh
scripts/setup-broker.sh
scripts/setup-python.sh

step "format"
cargo fmt --all --check
cargo fmt --manifest-path fuzz/Cargo.toml --all --check

step "clippy"
cargo clippy --locked --workspace --all-targets --all-features -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps

step "tests"
cargo test --locked --workspace --all-features

step "benchmarks, quick: every replay contender checked against the written entries and the floor, on Apache Kafka, the scripted broker and Tansu, in plain text and over SASL_SSL; writer bench smoke; codec bench smoke"
cargo bench --locked --bench replay -- --quick --partitions 1,4,16
cargo bench --locked --bench replay -- --quick --broker scripted --security SASL_SSL
cargo bench --locked --bench writer -- --quick
cargo bench --locked -p walfetch-codec --bench decode -- --test

step "benchmark gate: never slower than a scan where fetches are dear (the scripted broker holds every Fetch answer 1 ms; GreptimeDB's 64 regions; fails when walfetch's one-pass restart takes over 1.10x the scan's wall time, medians of 9 runs: the target is 1.05x, the rest is the noise measured in docs/replay-bench.md)"
cargo bench --locked --bench replay -- --quick --broker scripted --fetch-cost-us 1000 --only restart --workloads lz4-1w-pure --partitions 1,4 --regions 64 --entries 10000 --runs 9 --gate-scan 1.10

step "fuzz smoke (${FUZZ_SECONDS:-10} s per target)"
scripts/fuzz-smoke.sh "${FUZZ_SECONDS:-10}"

printf '\nall checks passed\n'
