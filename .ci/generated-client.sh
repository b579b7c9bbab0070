#!/usr/bin/env bash
# A real client of the committed OpenAPI document (issue #15): openapi-python-client
# (PyPI) generates a Python client from it, failing on any warning (a schema it could
# not turn into code), and .ci/generated_client_check.py drives a live server through
# that client as a user would; any error fails CI. The server runs without a worker,
# so no webhook leaves the machine.
# Usage: .ci/generated-client.sh VENV BINARY [DOCUMENT]  (default openapi/openapi.json)
set -euo pipefail
venv="$1"
binary="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
document="$(realpath "${3:-$root/openapi/openapi.json}")"
"$venv/bin/pip" install --quiet --disable-pip-version-check 'openapi-python-client>=0.29,<0.30'

# shellcheck source=.ci/live-server.sh
source "$root/.ci/live-server.sh"
start_live_server "$venv" "$binary"

# ruff (installed with the generator) formats the generated code; it must be on PATH.
PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate \
  --path "$document" --meta none --output-path "$work/deferhook_client" \
  --fail-on-warning
if ! PYTHONPATH="$work" "$venv/bin/python" "$root/.ci/generated_client_check.py" \
    "$base_url" "$token"; then
  echo "== server log"
  tail -n 50 "$work/server.log"
  exit 1
fi
