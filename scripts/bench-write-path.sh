#!/usr/bin/env bash
# The figures of issue #18 (the store's write path), RUNS times each (default 3), with
# the release binaries: JSON per run in OUT (default bench-results/write-path), then
# the medians with CPU per job (scripts/bench-summary.py). About 20 minutes.
# BACKENDS (default "sqlite postgres") picks the backends.
# Usage: cargo build --release --bins && scripts/bench-write-path.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench-results/write-path}"
SHOW="delivered jobs/s|lateness|CPU ms"
. scripts/bench-lib.sh
for be in ${BACKENDS:-sqlite postgres}; do
  run "burst-$be" --scenario burst --jobs 50000 --backend "$be"
  run "burst50-$be" --scenario burst --jobs 10000 --concurrency 50 --backend "$be"
  run "burst1-$be" --scenario burst --jobs 3000 --concurrency 1 --backend "$be"
  run "steady1000-$be" --scenario steady --rate 1000 --seconds 60 --backend "$be"
  run "steady800-$be" --scenario steady --rate 800 --seconds 60 --backend "$be"
done
if [[ " ${BACKENDS:-postgres} " == *" postgres "* ]]; then
  run "burst100-postgres" --scenario burst --jobs 20000 --subscribers 100 --destinations 10 --backend postgres
  run "burst100-postgres-2" --scenario burst --jobs 20000 --subscribers 100 --destinations 10 --backend postgres --instances 2
fi
python3 scripts/bench-summary.py "$OUT"
