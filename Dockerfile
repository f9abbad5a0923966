# Builds the pgcdc-kafka binary (librdkafka is compiled from source by rdkafka-sys).
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake pkg-config libssl-dev libsasl2-dev libcurl4-openssl-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin pgcdc-kafka

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      ca-certificates libssl3 libsasl2-2 libcurl4 zlib1g \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/pgcdc-kafka /usr/local/bin/pgcdc-kafka
USER 65534
ENTRYPOINT ["pgcdc-kafka"]
CMD ["run"]
