#!/usr/bin/env bash
# Regenerates the librdkafka interop fixtures in codec/tests/fixtures/librdkafka/.
#
# librdkafka (through the confluent-kafka Python package, which bundles it)
# writes records of several batch shapes with every compression codec to a
# local Tansu broker and reads them back; walfetch captures the raw Fetch
# `records` bytes. The codec tests decode the captures and compare every
# record with what librdkafka read.
#
#   scripts/regen-librdkafka-fixtures.sh
#
# Needs: python3 with the confluent-kafka version pinned in
# scripts/requirements-test.txt (scripts/setup-python.sh, run below, installs
# it), and Tansu (scripts/setup-broker.sh, also run below).
set -euo pipefail
cd "$(dirname "$0")/.."

out=codec/tests/fixtures/librdkafka
mkdir -p "$out"
scripts/setup-python.sh >/dev/null
scripts/setup-broker.sh >/dev/null
tansu="$(command -v tansu || echo "${CARGO_HOME:-$HOME/.cargo}/bin/tansu")"
cargo build --quiet --release --bin walfetch

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tansu" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >/dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null || true' EXIT
sleep 1

python3 scripts/fixtures/librdkafka_produce.py "127.0.0.1:$port" "$out"
for codec in none gzip snappy lz4 zstd; do
    target/release/walfetch capture -b "127.0.0.1:$port" -t "librdkafka-$codec" --out "$out/$codec.records"
done
ls -l "$out"
