#!/usr/bin/env bash
# A/B runs inside one benchmark: a --wrap command for scripts/bench.sh that
# runs the connector as variant A or B, switching every $BENCH_AB_EVERY
# invocations, so both variants see the same services and the same moments
# of a shared machine's load. A variant is a binary (default: the one the
# benchmark built) plus extra arguments:
#
#   two binaries:
#   BENCH_AB_A=/path/to/before BENCH_AB_B=/path/to/after BENCH_AB_EVERY=2 \
#     scripts/bench.sh --workloads s --avro --rounds 6 --wrap "$PWD/scripts/bench-ab.sh"
#   text against binary values:
#   BENCH_AB_A_ARGS=--pgoutput-binary=off BENCH_AB_B_ARGS=--pgoutput-binary=on BENCH_AB_EVERY=4 \
#     scripts/bench.sh --workloads a,c,e --avro --rounds 6 --wrap "$PWD/scripts/bench-ab.sh"
#
# Count the invocations: a backlog workload starts the connector twice per
# format (the run, then a no-op run), so with --avro BENCH_AB_EVERY=4
# switches per workload; with an odd number of workloads every (workload,
# format) then alternates round by round. (s) starts it once per format:
# BENCH_AB_EVERY=2. Each invocation is logged, with its variant and the load
# average, to $BENCH_AB_LOG (default target/bench/ab.log); the counter lives
# in $BENCH_AB_COUNTER (default target/bench/ab.counter): remove both
# before a new run.
#
# Warm up for two rounds (--warm-up-rounds 2): the first round after a
# single warm-up round still found the broker slow in three runs of three,
# and it is always the same variant's (BENCHMARKS.md, "The snapshot's
# shared counters and name compares"). Variant A runs first, warm-up
# rounds included: after an odd number of warm-up rounds the first counted
# round is B's. Read the variant of each round from $BENCH_AB_LOG, not
# from its position.
set -euo pipefail
every=${BENCH_AB_EVERY:-1}
dir="$(dirname "$0")/../target/bench"
mkdir -p "$dir"
counter=${BENCH_AB_COUNTER:-$dir/ab.counter}
log=${BENCH_AB_LOG:-$dir/ab.log}
n=$(cat "$counter" 2>/dev/null || echo 0)
echo $((n + 1)) >"$counter"
built=$1
shift
if (((n / every) % 2 == 0)); then
  variant=A bin=${BENCH_AB_A:-$built} extra=${BENCH_AB_A_ARGS:-}
else
  variant=B bin=${BENCH_AB_B:-$built} extra=${BENCH_AB_B_ARGS:-}
fi
echo "$(date -u +%T) $n $variant $bin $extra load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$log"
# shellcheck disable=SC2086 # the extra arguments are split on purpose
exec "$bin" "$@" $extra
