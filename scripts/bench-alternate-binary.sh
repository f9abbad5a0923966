#!/usr/bin/env bash
# A `--wrap` for scripts/bench.sh that measures text and binary pgoutput
# values side by side: the harness starts the connector twice per workload
# and format (the run, then a no-op run), so each such pair gets
# --pgoutput-binary off or on by an invocation counter, flipped every
# workload so each (workload, format) alternates between the two:
#
#   scripts/bench.sh --workloads a,c,e --avro --rounds 6 \
#     --wrap "$PWD/scripts/bench-alternate-binary.sh"
#
# (with 3 workloads and 6 rounds each (workload, format) runs 3 times in
# each mode). Which pair ran in which mode, with the load average, is
# appended to $BENCH_ALTERNATE_DIR/log (default target/bench/alternate);
# remove that directory before a new run.
set -euo pipefail
dir=${BENCH_ALTERNATE_DIR:-target/bench/alternate}
mkdir -p "$dir"
n=$(cat "$dir/counter" 2>/dev/null || echo 0)
echo $((n + 1)) > "$dir/counter"
# Invocation n: pair p = n/2, workload w = p/2 (JSON, then Avro), format f = p%2.
p=$((n / 2)); w=$((p / 2)); f=$((p % 2))
if (( (w + f) % 2 == 1 )); then mode=on; else mode=off; fi
echo "$(date -u +%T) n=$n w=$w f=$f binary=$mode load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/log"
exec "$@" "--pgoutput-binary=$mode"
