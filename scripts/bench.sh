#!/usr/bin/env bash
# The end-to-end backlog benchmark (benches/e2e/): pg_recvlogical and the
# release connector drain the same WAL backlog, then "Kafka alone" produces
# the records the connector wrote with a bare producer and the connector's
# producer settings; prints tables (medians with --rounds) and writes
# target/bench/results.json.
#
#   scripts/bench.sh                          defaults: a 200k rows, b 20k, c 150k
#   scripts/bench.sh --rows 1000000 --single 100000 --mixed 300000   the issue's sizes
#   scripts/bench.sh --workloads a --avro     only (a), in JSON and in Avro
#   scripts/bench.sh --workloads a,c --avro --rounds 3   medians of 3 interleaved rounds
#   scripts/bench.sh --warm-up-rounds 1 --rounds 3      one round first, not counted
#
# Needs what the tests need (README, "Tests"), plus pg_recvlogical (postgresql-15).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench e2e -- "$@"
