#!/usr/bin/env bash
# A/B runs inside one benchmark: a --wrap command for scripts/bench.sh that
# runs one of two connector binaries instead of the one it was given,
# switching every $BENCH_AB_EVERY invocations, so both variants see the same
# services and the same moments of a shared machine's load.
#
#   BENCH_AB_A=/path/to/before BENCH_AB_B=/path/to/after BENCH_AB_EVERY=2 \
#     scripts/bench.sh --workloads s --avro --rounds 6 --wrap "$PWD/scripts/bench-ab.sh"
#
# With --avro each round of (s) runs the connector twice (JSON, then Avro):
# BENCH_AB_EVERY=2 gives rounds A, B, A, B, ... Each invocation is logged,
# with the binary it ran, to $BENCH_AB_LOG (default target/bench/ab.log);
# the counter lives in $BENCH_AB_COUNTER (default target/bench/ab.counter).
set -euo pipefail
: "${BENCH_AB_A:?set BENCH_AB_A to the first binary}"
: "${BENCH_AB_B:?set BENCH_AB_B to the second binary}"
every=${BENCH_AB_EVERY:-1}
dir="$(dirname "$0")/../target/bench"
mkdir -p "$dir"
counter=${BENCH_AB_COUNTER:-$dir/ab.counter}
log=${BENCH_AB_LOG:-$dir/ab.log}
n=$(cat "$counter" 2>/dev/null || echo 0)
echo $((n + 1)) >"$counter"
shift # the binary the benchmark built
if (((n / every) % 2 == 0)); then bin=$BENCH_AB_A; variant=A; else bin=$BENCH_AB_B; variant=B; fi
echo "$n $variant $bin" >>"$log"
exec "$bin" "$@"
