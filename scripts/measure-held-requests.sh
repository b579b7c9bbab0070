#!/usr/bin/env bash
# The memory one waiting HTTP request costs deferhook (issue #14): an attempt in flight
# whose receiver has not answered. Starts `deferhook serve` (SQLite in a temporary
# directory, --allow-private-targets, long attempt timeout and lease) against receivers
# that read each request and never answer, holds N requests open for each N of the
# list (growing in one process), reads VmRSS from /proc/<pid>/status once all N are
# open, and prints bytes per held request: the slope between the counts and a
# least-squares fit over the held counts (N > 0; N = 0 still pays one-time start-up
# costs of the first attempts: connection pool, task queues).
#
# The subscribers are spread over many receiver ports (each a destination of its
# own), so a per-destination limit below N / ports does not cap the count.
#
# Usage: scripts/measure-held-requests.sh [PAYLOAD_BYTES [N ...]]
#   defaults: 1024 bytes of payload; N = 0 2000 5000 10000
# Environment: DEFERHOOK_BIN (default target/release/deferhook), PORTS (default 100),
#   TLS=1 for HTTPS receivers (a throwaway CA made with openssl, trusted through
#   SSL_CERT_FILE): a TLS session's buffers come on top of the plain connection's.
# Needs an open-files limit above the largest N plus about 1,100 (`ulimit -n`).
set -euo pipefail
bin="${DEFERHOOK_BIN:-target/release/deferhook}"
[[ -x "$bin" ]] || { echo "build it first: cargo build --release --bin deferhook" >&2; exit 1; }
exec python3 - "$bin" "${PORTS:-100}" "${TLS:-0}" "$@" <<'PY'
import asyncio, json, os, socket, ssl, subprocess, sys, tempfile, time, urllib.request

binary, ports, tls = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
payload_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 1024
counts = [int(n) for n in sys.argv[5:]] or [0, 2000, 5000, 10000]
assert counts == sorted(counts) and all(n % ports == 0 for n in counts), \
    f"counts must grow and be multiples of PORTS ({ports})"
held = 0


async def hold(reader, writer):
    """Reads one request (headers and Content-Length body) and never answers."""
    global held
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        held += 1
        await reader.read()  # until deferhook closes the connection
        held -= 1
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        pass
    except asyncio.CancelledError:  # the script is ending
        return
    writer.close()


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tls_context(workdir):
    """A CA and a certificate for 127.0.0.1 signed by it; returns the server context."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=workdir, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=held-requests CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1")
    with open(f"{workdir}/leaf.ext", "w") as ext:
        ext.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(f"{workdir}/leaf.pem", f"{workdir}/leaf.key")
    return context


async def main():
    workdir = tempfile.mkdtemp(prefix="held-requests-")
    context = tls_context(workdir) if tls else None
    servers = [await asyncio.start_server(hold, "127.0.0.1", 0, backlog=4096, ssl=context)
               for _ in range(ports)]
    receiver_ports = [s.sockets[0].getsockname()[1] for s in servers]
    listen = f"127.0.0.1:{free_port()}"
    base = f"http://{listen}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEFERHOOK_")}
    env["RUST_LOG"] = "warn"
    if tls:
        env["SSL_CERT_FILE"] = f"{workdir}/ca.pem"
    flags = ["serve", "--database-url", f"sqlite://{workdir}/held.db", "--listen", listen,
             "--allow-private-targets", "--max-in-flight", str(max(counts) + ports),
             "--attempt-timeout-ms", "600000", "--lease-ms", "900000",
             "--max-payload-bytes", str(max(payload_bytes * 2, 262144))]
    server = subprocess.Popen([binary, *flags], env=env, stderr=open(f"{workdir}/log", "w"))
    try:
        for _ in range(300):
            try:
                call(base, "GET", "/healthz")
                break
            except OSError:
                await asyncio.sleep(0.1)
        ids = [f"held-{i}" for i in range(ports)]
        for sub, port in zip(ids, receiver_ports):
            call(base, "PUT", f"/v1/subscribers/{sub}",
                 {"url": f"{'https' if tls else 'http'}://127.0.0.1:{port}/hook",
                  "max_in_flight": 10000})
        payload = {"pad": "x" * max(0, payload_bytes - len('{"pad":""}'))}
        print(f"deferhook pid {server.pid}; payload {len(json.dumps(payload, separators=(',', ':')))}"
              f" bytes; {ports} receiver ports ({'HTTPS' if tls else 'HTTP'}); SQLite in {workdir}")
        points, events = [], 0
        for n in counts:
            while events * ports < n:
                await asyncio.to_thread(call, base, "POST", "/v1/events",
                                        {"event_id": f"evt-{events}", "payload": payload,
                                         "subscriber_ids": ids})
                events += 1
            deadline = time.monotonic() + 120
            while held < n:
                assert time.monotonic() < deadline, f"only {held} of {n} requests held"
                await asyncio.sleep(0.05)
            await asyncio.sleep(3)  # let lease renewals and allocator settle
            samples = []
            for _ in range(5):
                samples.append(rss_bytes(server.pid))
                await asyncio.sleep(0.4)
            rss = sorted(samples)[len(samples) // 2]
            fds = len(os.listdir(f"/proc/{server.pid}/fd"))
            points.append((n, rss))
            print(f"held {held:>6}  VmRSS {rss / 2**20:8.1f} MiB  open fds {fds}", flush=True)
        for (n0, r0), (n1, r1) in zip(points, points[1:]):
            print(f"  {n0:>6} -> {n1:>6}: {(r1 - r0) / (n1 - n0):8.0f} bytes per held request")
        fit = [(n, r) for n, r in points if n > 0]
        if len(fit) >= 2:
            mean_n = sum(n for n, _ in fit) / len(fit)
            mean_r = sum(r for _, r in fit) / len(fit)
            slope = sum((n - mean_n) * (r - mean_r) for n, r in fit) / \
                sum((n - mean_n) ** 2 for n, _ in fit)
            print(f"least-squares slope over N > 0: {slope:.0f} bytes per held request")
    finally:
        server.terminate()
        server.wait()
        for s in servers:
            s.close()


asyncio.run(main())
PY
