# shellcheck shell=bash
# Sourced by the CI scripts that test the live API: starts BINARY on a free port of
# 127.0.0.1 with a fresh SQLite database in a temporary folder, no worker (so no webhook
# leaves the machine) and a random API token, and waits until it is ready.
# Sets: work (the folder, removed on exit), port, token, base_url, server (its pid).
# Usage: source .ci/live-server.sh; start_live_server VENV BINARY
start_live_server() {
  local venv="$1" binary="$2"
  work="$(mktemp -d)"
  port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  token="$("$venv/bin/python" -c 'import secrets; print(secrets.token_hex(24))')"
  base_url="http://127.0.0.1:$port"
  "$binary" serve --no-worker --listen "127.0.0.1:$port" \
    --database-url "sqlite://$work/live.db" --api-token "$token" \
    --max-failed-credentials 1000000 \
    >"$work/server.log" 2>&1 &
  server=$!
  # shellcheck disable=SC2064
  trap "kill $server 2>/dev/null || true; rm -rf '$work'" EXIT
  for _ in $(seq 1 100); do
    curl -fsS "$base_url/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "the server did not become ready:"
  tail -n 50 "$work/server.log"
  return 1
}
