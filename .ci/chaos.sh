#!/usr/bin/env bash
# CI: the chaos soak (issue #17) at its CI size with the debug binaries: two minutes of
# load and every kind of fault on SQLite (one instance) and on PostgreSQL (three
# instances on a private throwaway cluster, one of them with a skewed clock), a fixed
# seed, then the audit of every job. Any violation fails. The 30-minute runs are in
# BENCHMARKS.md ("Reliability"). Run after `cargo build` from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."

seed="${DEFERHOOK_CHAOS_SEED:-17}"
minutes="${DEFERHOOK_CHAOS_MINUTES:-2}"
for backend in sqlite postgres; do
  instances=1
  if [ "$backend" = postgres ]; then instances=3; fi
  echo "-- chaos soak: $backend, $instances instance(s), $minutes min, seed $seed"
  timeout 900 target/debug/deferhook-bench --scenario chaos --backend "$backend" \
    --instances "$instances" --minutes "$minutes" --seed "$seed" \
    --server-binary target/debug/deferhook \
    --json "${TMPDIR:-/tmp}/deferhook-chaos-$backend.json"
done
