#!/usr/bin/env bash
# Installs the Python packages pinned in scripts/requirements-test.txt
# (confluent-kafka, which bundles librdkafka, and kafka-python with its
# codecs, for the interop tests and fixtures), unless exactly those
# versions are already installed.
#
#   scripts/setup-python.sh
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=scripts/requirements-test.txt

# Exit status 0 when every `name==version` line is installed at that version.
if python3 - "${requirements}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

ok = True
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = "not installed"
    if have == want:
        print(f"setup-python: {name} {want} already installed")
    else:
        print(f"setup-python: {name} is {have}, pinned {want}")
        ok = False
sys.exit(0 if ok else 1)
PY
then
    exit 0
fi

echo "setup-python: installing ${requirements}"
python3 -m pip install --quiet -r "${requirements}"
