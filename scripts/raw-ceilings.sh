#!/usr/bin/env bash
# The databases' raw ceilings on this machine, without deferhook or any Rust driver in
# the way (issue #8, BENCHMARKS.md): single-row insert+commit transactions per second
# and rows per second moved by a batched claim (100 rows per commit).
#   SQLite: Python's built-in sqlite3, WAL, synchronous FULL (deferhook's setting) and
#           NORMAL.
#   PostgreSQL: pgbench (PostgreSQL's own benchmark tool), 1 and 16 clients, 10 s each,
#           against a throwaway database on $PGURL's server.
# The same measurements through sqlx: `deferhook-bench --scenario ceilings`.
# Usage: scripts/raw-ceilings.sh [sqlite|postgres|all]
set -euo pipefail
what="${1:-all}"
PGURL="${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}"

if [[ "$what" == sqlite || "$what" == all ]]; then
python3 - <<'PY'
import os, sqlite3, tempfile, time
rows = 50_000
for sync in ("FULL", "NORMAL"):
    path = os.path.join(tempfile.mkdtemp(), "ceiling.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={sync}")
    db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, "
               "due_at INTEGER, payload TEXT NOT NULL)")
    db.execute("CREATE INDEX jobs_due ON jobs (due_at) WHERE state IN ('scheduled', 'in_flight')")
    n = 5_000
    started = time.perf_counter()
    for i in range(n):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO jobs VALUES (?, 'scheduled', ?, ?)", (f"c{i}", i, '{"n":1}'))
        db.execute("COMMIT")
    print(f"SQLite WAL synchronous={sync}: single-row insert + commit: "
          f"{n / (time.perf_counter() - started):.0f}/s")
    db.execute("DELETE FROM jobs")
    db.executemany("INSERT INTO jobs VALUES (?, 'scheduled', ?, '{}')",
                   ((f"r{i}", i) for i in range(rows)))
    started, claimed = time.perf_counter(), 0
    while True:
        db.execute("BEGIN IMMEDIATE")
        got = db.execute("UPDATE jobs SET state = 'in_flight', due_at = 9100000000000 "
                         "WHERE id IN (SELECT id FROM jobs WHERE state IN ('scheduled', 'in_flight') "
                         "AND state = 'scheduled' AND due_at <= 9000000000000 "
                         "ORDER BY due_at LIMIT 100) RETURNING id").fetchall()
        db.execute("COMMIT")
        if not got:
            break
        claimed += len(got)
    print(f"SQLite WAL synchronous={sync}: batched claim (100 rows per commit): "
          f"{claimed / (time.perf_counter() - started):.0f} rows/s")
PY
fi

if [[ "$what" == postgres || "$what" == all ]]; then
db="deferhook_ceiling_$$"
server="${PGURL%/*}"
psql "$PGURL" -qc "CREATE DATABASE $db"
trap 'psql "$PGURL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
psql "$server/$db" -q <<'SQL'
CREATE TABLE jobs (id bigserial PRIMARY KEY, state text NOT NULL, due_at bigint, payload text NOT NULL);
CREATE INDEX jobs_due ON jobs (due_at) WHERE state IN ('scheduled', 'in_flight');
SQL
dir="$(mktemp -d)"
echo "INSERT INTO jobs (state, due_at, payload) VALUES ('scheduled', 1, '{\"n\":1}');" > "$dir/insert.sql"
cat > "$dir/claim.sql" <<'SQL'
UPDATE jobs SET state = 'in_flight', due_at = 9100000000000 WHERE id IN (SELECT id FROM jobs WHERE state IN ('scheduled', 'in_flight') AND state = 'scheduled' AND due_at <= 9000000000000 ORDER BY due_at LIMIT 100 FOR UPDATE SKIP LOCKED);
SQL
for clients in 1 16; do
  tps=$(pgbench -n -c "$clients" -j 2 -T 10 -f "$dir/insert.sql" "$server/$db" | awk '/^tps/ {print int($3)}')
  echo "PostgreSQL, $clients client(s): single-row insert + commit: $tps/s"
  psql "$server/$db" -qc "TRUNCATE jobs; INSERT INTO jobs (state, due_at, payload) SELECT 'scheduled', n, '{}' FROM generate_series(1, 1000000) n; ANALYZE jobs"
  tps=$(pgbench -n -c "$clients" -j 2 -T 10 -f "$dir/claim.sql" "$server/$db" | awk '/^tps/ {print $3}')
  echo "PostgreSQL, $clients client(s): batched claim (100 rows per commit, SKIP LOCKED): $(python3 -c "print(int(float('$tps') * 100))") rows/s"
done
rm -r "$dir"
fi
