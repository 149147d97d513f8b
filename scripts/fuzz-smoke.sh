#!/usr/bin/env bash
# Smoke-runs every cargo-fuzz target in fuzz/ for SECONDS each (default 10),
# starting from the committed seeds (fuzz/seeds/<target>/) and growing a
# scratch corpus in fuzz/corpus/<target>/ (ignored by git). Exits non-zero on
# the first crash, timeout, out-of-memory or build failure; a crash input is
# left in fuzz/artifacts/<target>/.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS]
#
# Needs the nightly toolchain (libFuzzer's instrumentation) and cargo-fuzz,
# which is installed here if missing. The codec forbids unsafe code, so the
# targets are built without a sanitizer (-s none): AddressSanitizer would
# only slow them down.
set -euo pipefail

seconds="${1:-10}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../fuzz"

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz-smoke: the nightly toolchain is required (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz-smoke: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

# -a: debug assertions and overflow checks, so that arithmetic a hostile
# input overflows is a crash here, not a wrapped value.
cargo +nightly fuzz build -a -s none

for target in $(cargo +nightly fuzz list); do
  mkdir -p "corpus/$target"
  seeds=()
  if [ -d "seeds/$target" ]; then
    seeds=("seeds/$target")
  fi
  echo "fuzz-smoke: $target for ${seeds:+seeded }${seconds}s" >&2
  cargo +nightly fuzz run -a -s none "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
done
echo "fuzz-smoke: every target ran ${seconds}s without a crash" >&2
