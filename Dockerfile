# Builds the pgcdc-kafka binary (librdkafka is compiled from source by rdkafka-sys).
#
#   docker build --build-arg PGCDC_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t pgcdc-kafka .
#
# .dockerignore leaves .git out of the context, so the commit that --version,
# the start-up line and pgcdc_build_info show comes from that build argument
# ("unknown" without it).
FROM rust:1-bookworm AS build
# No libcurl: rdkafka is built without its curl feature (OIDC token
# retrieval), so librdkafka never links it.
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake pkg-config libssl-dev libsasl2-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src

# The dependencies first, in their own layer, built against stub sources:
# a change to the connector's code reuses this layer instead of compiling
# librdkafka and every crate again. Only the manifests, the lock file, the
# vendored rdkafka-sys, the build script and .cargo/config.toml (jemalloc's
# built-in settings) can invalidate it.
COPY Cargo.toml Cargo.lock build.rs ./
COPY .cargo .cargo
COPY vendor vendor
COPY wire/Cargo.toml wire/Cargo.toml
COPY testcontainers/Cargo.toml testcontainers/Cargo.toml
RUN mkdir -p src wire/src testcontainers/src benches/e2e \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs wire/src/lib.rs testcontainers/src/lib.rs \
    && for b in benches/transforms.rs benches/codec.rs benches/e2e/main.rs benches/streamed.rs; do \
         echo 'fn main() {}' > "$b"; done \
    && cargo build --release --locked --bin pgcdc-kafka \
    && rm -rf src wire/src testcontainers/src benches

ARG PGCDC_GIT_COMMIT=unknown
ENV PGCDC_GIT_COMMIT=${PGCDC_GIT_COMMIT}
COPY . .
# COPY keeps the context's modification times, which may be older than the
# stubs' build: touch the workspace's own sources so cargo rebuilds them.
RUN touch build.rs src/main.rs src/lib.rs wire/src/lib.rs testcontainers/src/lib.rs \
    && cargo build --release --locked --bin pgcdc-kafka

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      ca-certificates libssl3 libsasl2-2 zlib1g \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/pgcdc-kafka /usr/local/bin/pgcdc-kafka
USER 65534
# /metrics, /healthz and /readyz (docs/OPERATIONS.md, "Health endpoints").
ENV PGCDC_METRICS_ADDR=0.0.0.0:9187
EXPOSE 9187
# Liveness: /healthz answers 200 while the process serves (readiness,
# /readyz, is for orchestrators that route or wait on it, e.g. a Kubernetes
# readinessProbe). bash's /dev/tcp, since the slim image has no curl or wget.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9187 && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["pgcdc-kafka"]
CMD ["run"]
