#!/usr/bin/env bash
# Every benchmark scenario of BENCHMARKS.md on both backends, RUNS times each (default 3),
# with the release binaries; JSON per run in OUT (default bench-results/), then a
# summary of medians (scripts/bench-summary.py), then the incident's runs (their JSON in
# OUT/incident/). Takes about 30 minutes with RUNS=3.
# BACKENDS (default "sqlite postgres") picks the backends.
# Usage: cargo build --release --bins && scripts/bench-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench-results}"
SHOW="accepted jobs/s|delivered jobs/s|lateness|RSS|CPU|duplicates|while waiting"
. scripts/bench-lib.sh
for be in ${BACKENDS:-sqlite postgres}; do
  run "burst-$be" --scenario burst --jobs 50000 --backend "$be"
  run "burst50-$be" --scenario burst --jobs 10000 --concurrency 50 --backend "$be"
  run "steady-$be" --scenario steady --rate 1000 --seconds 60 --backend "$be"
  run "backlog-$be" --scenario backlog --jobs 100000 --backend "$be"
  run "fanout-$be" --scenario fanout --jobs 2000 --slow 300 --slow-ms 2000 --backend "$be"
done
[[ " ${BACKENDS:-postgres} " == *" postgres "* ]] && run "burst-postgres-2" --scenario burst --jobs 50000 --backend postgres --instances 2
python3 scripts/bench-summary.py "$OUT"
# The incident has its own report: per fan-out, incident against control; across
# hosts (issue #14) and on one shared host (issue #33).
mkdir -p "$OUT/incident"
for be in ${BACKENDS:-sqlite postgres}; do
  for i in $(seq 1 "$RUNS"); do
    echo "== incident-$be run $i"
    "$B" --scenario incident --backend "$be" --json "$OUT/incident/incident-$be-$i.json" \
      | grep -E "^\| (incident-|unwell jobs)|^target" || true
    echo "== incident-shared-host-$be run $i"
    "$B" --scenario incident --shared-host --backend "$be" \
      --json "$OUT/incident/incident-shared-host-$be-$i.json" \
      | grep -E "^\| (incident-|unwell jobs)|^target" || true
  done
done
