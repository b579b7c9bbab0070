# deferhook: the service (`deferhook`) and the example receiver (`deferhook-receiver`).
#
#   docker build -t deferhook .
#   docker run --rm -v deferhook-data:/var/lib/deferhook deferhook
#
# By default the image listens on 127.0.0.1:8080, reachable only from inside the
# container: without API tokens `deferhook serve` refuses a non-loopback address. To
# reach the API from outside, set tokens and listen on all interfaces:
#   docker run -e DEFERHOOK_API_TOKENS="$(openssl rand -hex 32)" \
#     -e DEFERHOOK_LISTEN=0.0.0.0:8080 -p 127.0.0.1:8080:8080 deferhook
# The delivery worker is not affected: it makes outgoing requests only.

# ---- build -------------------------------------------------------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin deferhook --example receiver \
    && cp target/release/deferhook /usr/local/bin/deferhook \
    && cp target/release/examples/receiver /usr/local/bin/deferhook-receiver

# ---- runtime -----------------------------------------------------------------------
FROM debian:bookworm-slim

# ca-certificates: TLS to https subscribers (the platform's roots); curl: the healthcheck.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 deferhook \
    && useradd --system --uid 10001 --gid deferhook --home-dir /var/lib/deferhook \
       --no-create-home --shell /usr/sbin/nologin deferhook \
    && mkdir -p /var/lib/deferhook \
    && chown deferhook:deferhook /var/lib/deferhook

COPY --from=build /usr/local/bin/deferhook /usr/local/bin/deferhook
COPY --from=build /usr/local/bin/deferhook-receiver /usr/local/bin/deferhook-receiver

# Numeric, so that runtimes checking for a non-root user (runAsNonRoot) can verify it.
USER 10001:10001
# The default database, sqlite://deferhook.db, is relative to this directory, and so is
# the key file that encrypts its subscriber secrets, deferhook.db.key, generated at the
# first start: back the volume up whole (README, "Secrets").
WORKDIR /var/lib/deferhook
VOLUME ["/var/lib/deferhook"]

# Loopback by default (see the note at the top): reachable from outside only with API
# tokens set. Set explicitly so that it is visible here.
ENV DEFERHOOK_LISTEN=127.0.0.1:8080
EXPOSE 8080

# Runs inside the container, so loopback works. With DEFERHOOK_NO_API=true there is no
# listener: disable this healthcheck for such a container (docker-compose.yml does).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1

# deferhook handles SIGTERM itself (finishes attempts for --shutdown-grace-ms, default
# 10 s, then releases leases): give `docker stop` a longer timeout than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["deferhook"]
CMD ["serve"]
