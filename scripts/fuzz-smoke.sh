#!/usr/bin/env bash
# Smoke-runs every cargo-fuzz target in fuzz/ for SECONDS each (default 10),
# starting from the committed seeds (fuzz/seeds/<target>/) and growing a
# scratch corpus in fuzz/corpus/<target>/ (ignored by git). Exits non-zero on
# the first crash, timeout, out-of-memory or build failure; a crash input is
# left in fuzz/artifacts/<target>/.
#
# Usage: scripts/fuzz-smoke.sh [SECONDS]
#
# libFuzzer's instrumentation needs unstable compiler flags: the nightly
# toolchain (`cargo +nightly`) where rustup has one, else the stable toolchain
# with RUSTC_BOOTSTRAP=1, which lets stable accept them (the machines CI runs
# on may have no nightly). cargo-fuzz is installed here if missing; set
# FUZZ_TOOLCHAIN=stable or =nightly to choose. The codec forbids unsafe code, so the
# targets are built without a sanitizer (-s none): AddressSanitizer would
# only slow them down.
set -euo pipefail

seconds="${1:-10}"
case "$seconds" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../fuzz"

toolchain="${FUZZ_TOOLCHAIN:-}"
if [ -z "$toolchain" ]; then
  if cargo +nightly --version >/dev/null 2>&1; then
    toolchain=nightly
  else
    toolchain=stable
  fi
fi
case "$toolchain" in
  nightly) ;;
  stable)
    echo "fuzz-smoke: no nightly toolchain; building on stable with RUSTC_BOOTSTRAP=1" >&2
    export RUSTC_BOOTSTRAP=1
    ;;
  *) echo "fuzz-smoke: FUZZ_TOOLCHAIN must be nightly or stable, not '$toolchain'" >&2; exit 2 ;;
esac
if ! cargo "+$toolchain" --version >/dev/null 2>&1; then
  echo "fuzz-smoke: the $toolchain toolchain is not installed (rustup toolchain install $toolchain)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz-smoke: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

# -a: debug assertions and overflow checks, so that arithmetic a hostile
# input overflows is a crash here, not a wrapped value.
cargo "+$toolchain" fuzz build -a -s none

for target in $(cargo "+$toolchain" fuzz list); do
  mkdir -p "corpus/$target"
  seeds=()
  if [ -d "seeds/$target" ]; then
    seeds=("seeds/$target")
  fi
  echo "fuzz-smoke: $target for ${seeds:+seeded }${seconds}s" >&2
  cargo "+$toolchain" fuzz run -a -s none "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
done
echo "fuzz-smoke: every target ran ${seconds}s without a crash" >&2
