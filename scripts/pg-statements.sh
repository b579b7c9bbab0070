#!/usr/bin/env bash
# Statements and commits per delivered job on PostgreSQL, for one deferhook-bench
# scenario (issue #36's first figure): runs the scenario through scripts/pg-profile.sh
# (a private cluster with pg_stat_statements), then prints
#   - statements per job: every statement the server ran, BEGIN/COMMIT/ROLLBACK and the
#     migrations aside, divided by the jobs delivered, with each kind's share;
#   - write commits per job: transactions that were given a transaction id (only a
#     transaction that writes gets one), divided by the jobs delivered.
# Usage: cargo build --release --bins &&
#        scripts/pg-statements.sh --scenario burst --jobs 2000 --concurrency 1
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
trap 'rm -f "$report"' EXIT
PG_STATEMENTS_JSON="$report" QUIET=1 scripts/pg-profile.sh --json "$report.bench" "$@"
python3 - "$report" "$report.bench" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
bench = json.load(open(sys.argv[2]))
jobs = bench.get("delivered") or bench.get("jobs") or 0
if not jobs:
    sys.exit("the run delivered no jobs")
rows = stats["statements"]
def kind(query):
    q = " ".join(query.split())
    upper = q.upper()
    for skip in ("BEGIN", "COMMIT", "ROLLBACK"):
        if upper.startswith(skip):
            return None
    if "_SQLX_MIGRATIONS" in upper or upper.startswith(("CREATE ", "ALTER ", "DROP ", "COMMENT ")):
        return None
    return q[:100]
total = 0
kinds = []
for row in rows:
    k = kind(row["query"])
    if k is None:
        continue
    total += row["calls"]
    kinds.append((row["calls"], k))
commits = stats["write_transactions"]
print(f"jobs delivered: {jobs}")
print(f"statements per job (besides BEGIN/COMMIT): {total / jobs:.2f}")
print(f"write commits per job: {commits / jobs:.2f}")
print("by statement (calls per job):")
for calls, k in sorted(kinds, reverse=True)[:25]:
    if calls / jobs >= 0.005:
        print(f"  {calls / jobs:6.3f}  {k}")
PY
rm -f "$report.bench"
