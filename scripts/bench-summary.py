#!/usr/bin/env python3
"""Medians of the benchmark runs in a directory of deferhook-bench JSON files
(NAME-RUN.json, as scripts/bench-all.sh writes them), as a Markdown table."""
import json, pathlib, statistics, sys
from collections import defaultdict

runs = defaultdict(list)
for path in sorted(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results").glob("*.json")):
    name = path.stem.rsplit("-", 1)[0]
    runs[name].append(json.loads(path.read_text()))

def database(reports):
    """The median database CPU per job, or "in the server" (SQLite: no such process)."""
    values = [r.get("database_cpu_ms_per_job") for r in reports]
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.3f}" if values else "(in the server)"

def med(values):
    return statistics.median(values) if values else float("nan")

print("| run | runs | accepted/s | delivered/s | create ms p50 / p99 | lateness ms p50 / p99 / max "
      "| API ms p50 / p99 (backlog) | peak RSS MiB | CPU s | CPU ms/job server + db | duplicates |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, reports in runs.items():
    get = lambda f: med([f(r) for r in reports])
    print(
        f"| {name} | {len(reports)} | {get(lambda r: r['accepted_per_s']):.0f} "
        f"| {get(lambda r: r['delivered_per_s']):.0f} "
        f"| {get(lambda r: r['create_latency_ms']['p50']):.1f} / {get(lambda r: r['create_latency_ms']['p99']):.1f} "
        f"| {get(lambda r: r['lateness_ms']['p50']):.0f} / {get(lambda r: r['lateness_ms']['p99']):.0f} / {get(lambda r: r['lateness_ms']['max']):.0f} "
        f"| {get(lambda r: r['probe_latency_ms']['p50']):.1f} / {get(lambda r: r['probe_latency_ms']['p99']):.1f} "
        f"| {get(lambda r: max(r['server_peak_rss_mib'])):.1f} "
        f"| {get(lambda r: sum(r['server_cpu_seconds'])):.2f} "
        f"| {get(lambda r: r.get('server_cpu_ms_per_job') or 0):.3f} + {database(reports)} "
        f"| {max(r['duplicates'] for r in reports)} |"
    )
