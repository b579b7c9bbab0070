# Shared by the benchmark scripts: `run NAME FLAGS...` runs deferhook-bench RUNS times
# (default 3) with FLAGS, the JSON of run i in OUT/NAME-i.json, printing the lines that
# match SHOW. Source it after `cd` to the repository.
B=target/release/deferhook-bench
RUNS="${RUNS:-3}"
run() { # name, then bench flags
  local name="$1"; shift
  mkdir -p "$OUT"
  for i in $(seq 1 "$RUNS"); do
    echo "== $name run $i"
    "$B" "$@" --json "$OUT/$name-$i.json" | grep -E "$SHOW" || true
  done
}
