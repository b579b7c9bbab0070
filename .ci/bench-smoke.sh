#!/usr/bin/env bash
# CI: the benchmark in its smoke size (issue #8) with the debug binaries: 200 jobs due
# now on SQLite must all arrive, none twice. Figures from a debug build mean nothing;
# this only checks that the harness works and finds no duplicates. Run after
# `cargo build` from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."

json="${TMPDIR:-/tmp}/deferhook-bench-smoke.json"
rm -f "$json"
timeout 60 target/debug/deferhook-bench --scenario burst --jobs 200 --backend sqlite \
  --server-binary target/debug/deferhook --timeout 30 --json "$json"

python3 - "$json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
jobs, delivered, duplicates = report["jobs"], report["delivered"], report["duplicates"]
print(f"bench smoke: {delivered} of {jobs} delivered, {duplicates} duplicates")
if jobs != 200 or delivered != jobs or duplicates != 0:
    sys.exit("bench smoke failed")
PY
