#!/usr/bin/env bash
# Makes a PostgreSQL server available for the tests and exports
# DEFERHOOK_TEST_POSTGRES_URL. Sourced by .ci/run.
#   1. the server at 127.0.0.1:5432 when it answers;
#   2. else the machine's cluster, started with pg_ctlcluster;
#   3. else a throwaway cluster of the installed server (installed with apt when
#      missing) in a temporary directory on port 55432, removed at exit.

pg_answers() { pg_isready -h 127.0.0.1 -p "$1" -q 2>/dev/null; }

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if ! command -v pg_isready >/dev/null 2>&1; then
  pg_isready() { "$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/pg_isready" "$@"; }
fi

# DEFERHOOK_CI_THROWAWAY_PG=1 skips the first two choices (to test the third).
if [ "${DEFERHOOK_CI_THROWAWAY_PG:-}" != 1 ] && pg_answers 5432; then
  echo "using the PostgreSQL server at 127.0.0.1:5432"
  export DEFERHOOK_TEST_POSTGRES_URL="${DEFERHOOK_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  return 0 2>/dev/null || exit 0
fi

if [ "${DEFERHOOK_CI_THROWAWAY_PG:-}" != 1 ] && command -v pg_ctlcluster >/dev/null 2>&1 \
  && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  done
  for _ in $(seq 1 30); do pg_answers 5432 && break; sleep 0.5; done
  if pg_answers 5432; then
    echo "started the machine's PostgreSQL cluster at 127.0.0.1:5432"
    export DEFERHOOK_TEST_POSTGRES_URL="${DEFERHOOK_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
    return 0 2>/dev/null || exit 0
  fi
fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ]; then
  echo "installing the PostgreSQL server (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
pgdir=$(mktemp -d /tmp/deferhook-pg.XXXXXX)
chmod 755 "$pgdir"
if [ "$(id -u)" = 0 ]; then chown postgres "$pgdir"; fi
as_postgres "$bin/initdb" -D "$pgdir/data" -A trust -U postgres >/dev/null
as_postgres "$bin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w \
  -o "-p 55432 -k $pgdir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >/dev/null
stop_throwaway_pg() {
  as_postgres "$bin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$pgdir"
}
trap stop_throwaway_pg EXIT
echo "started a throwaway PostgreSQL cluster at 127.0.0.1:55432"
export DEFERHOOK_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:55432/postgres"
