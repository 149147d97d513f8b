#!/usr/bin/env bash
# Installs Tansu 0.6.0, the Kafka-compatible broker the integration tests
# start (support/src/tansu.rs), unless that version is already installed;
# and stunnel4, the TLS terminator the TLS tests put in front of it
# (support/src/stunnel.rs), unless stunnel4 or stunnel is on PATH.
#
#   scripts/setup-broker.sh
#
# Looks at $TANSU_BIN, `tansu` on PATH and ~/.cargo/bin/tansu. A cold install
# takes about 10 minutes on 2 cores.
set -euo pipefail

version=0.6.0
want="tansu ${version}"
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"

if command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1; then
    echo "setup-broker: stunnel already installed at $(command -v stunnel4 || command -v stunnel)"
else
    echo "setup-broker: installing stunnel4 (apt-get)"
    apt-get update
    apt-get install -y stunnel4
fi

for candidate in "${TANSU_BIN:-}" "$(command -v tansu || true)" "${cargo_bin}/tansu"; do
    if [ -n "${candidate}" ] && [ -x "${candidate}" ]; then
        found="$("${candidate}" --version 2>/dev/null || true)"
        if [ "${found}" = "${want}" ]; then
            echo "setup-broker: ${want} already installed at ${candidate}"
            exit 0
        fi
        echo "setup-broker: ${candidate} is '${found}', not '${want}'"
    fi
done

echo "setup-broker: installing ${want} into ${cargo_bin} (about 10 minutes cold on 2 cores)"
cargo install tansu --version "${version}" --locked --features dynostore
"${cargo_bin}/tansu" --version
