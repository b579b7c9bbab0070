#!/usr/bin/env bash
# Where the database's CPU goes (issue #18, BENCHMARKS.md "step 3"): starts a private
# PostgreSQL cluster (the installed server's initdb, a free port, trust auth, autovacuum
# off like this machine's server) with pg_stat_statements (track_planning on) and, when
# AUTO_EXPLAIN_MS is set, auto_explain of every statement slower than that many ms
# (plans with actual rows and timing, in the cluster's log). Runs one deferhook-bench
# scenario against it with the release binaries, then prints the statements by total
# execution plus planning time (calls, plans, ms per call). The cluster is removed
# afterwards unless KEEP=1. scripts/pg-statements.sh runs it for statements and
# commits per job.
# BIN_DIR picks other release binaries (default target/release).
# Usage: cargo build --release --bins &&
#        scripts/pg-profile.sh --scenario burst --jobs 2000 --concurrency 1
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "no PostgreSQL server installed (initdb)" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
cleanup() {
  as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "cluster kept in $dir (port $port)"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
libs="pg_stat_statements"
if [ -n "${AUTO_EXPLAIN_MS:-}" ]; then libs="$libs,auto_explain"; fi
cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_buffers = 128MB
autovacuum = off
shared_preload_libraries = '$libs'
pg_stat_statements.track = all
pg_stat_statements.track_planning = on
auto_explain.log_min_duration = '${AUTO_EXPLAIN_MS:--1}'
auto_explain.log_analyze = on
auto_explain.log_nested_statements = on
CONF
as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
url="postgres://postgres@127.0.0.1:$port/postgres"
psql "$url" -qc "CREATE EXTENSION pg_stat_statements" >/dev/null
next_xid() { psql "$url" -Atqc "SELECT pg_snapshot_xmax(pg_current_snapshot())"; }
xid_before=$(next_xid)
"${BIN_DIR:-target/release}"/deferhook-bench --backend postgres --postgres-url "$url" "$@" \
  | grep -E "delivered jobs/s|lateness|CPU ms" || true
xid_after=$(next_xid)
if [ -n "${PG_STATEMENTS_JSON:-}" ]; then
  # For scripts/pg-statements.sh: every statement's calls, and the transactions given
  # an id during the run (only a transaction that writes is given one).
  psql "$url" -Atqc "SELECT json_build_object('write_transactions', $xid_after - $xid_before,
      'statements', COALESCE(json_agg(json_build_object('calls', calls, 'query', query)), '[]'))
    FROM pg_stat_statements WHERE query NOT LIKE '%DATABASE%'" > "$PG_STATEMENTS_JSON"
fi
[ "${QUIET:-0}" = 1 ] || psql "$url" -c "SELECT calls, plans, round(total_exec_time::numeric) AS exec_ms,
    round(total_plan_time::numeric) AS plan_ms,
    round(((total_exec_time + total_plan_time) / greatest(calls, 1))::numeric, 3) AS ms_per_call,
    rows, left(regexp_replace(query, '\s+', ' ', 'g'), 90) AS statement
  FROM pg_stat_statements WHERE query NOT LIKE '%DATABASE%'
  ORDER BY total_exec_time + total_plan_time DESC LIMIT 20"
if [ -n "${AUTO_EXPLAIN_MS:-}" ]; then
  echo "plans slower than ${AUTO_EXPLAIN_MS} ms: $dir/log (KEEP=1 keeps it)"
fi
