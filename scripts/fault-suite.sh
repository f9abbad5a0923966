#!/usr/bin/env bash
# The fault-injection suite (tests/crash_recovery/) with its summary table.
#
#   scripts/fault-suite.sh          the short form CI runs as part of `cargo test`
#   scripts/fault-suite.sh --soak   the long form: 200 kill -9 rounds (the
#                                   other scenarios' rounds scaled from it),
#                                   the scenarios repeated 5 times
#
# Extra arguments go to the test binary (e.g. a test name filter). Every
# scenario prints a FAULT-SUITE line (scenario, changes written, changes
# verified, duplicates, result); this collects them into a table.
set -euo pipefail
cd "$(dirname "$0")/.."

repeat=1
if [[ "${1:-}" == "--soak" ]]; then
    shift
    export PGCDC_FAULT_ROUNDS="${PGCDC_FAULT_ROUNDS:-200}"
    repeat="${PGCDC_SOAK_REPEAT:-5}"
fi

out="$(mktemp -t fault-suite.XXXXXX)"
# The whole output is kept when a scenario fails (its list of problems is
# not in the summary); otherwise it is removed.
trap '[[ $status -eq 0 ]] && rm -f "$out" || echo "whole output kept in $out" >&2' EXIT
status=0
for ((i = 1; i <= repeat; i++)); do
    set +e
    cargo test --locked --test crash_recovery -- --nocapture --test-threads=1 "$@" \
        2>&1 | tee -a "$out" | grep -aE '^\[|^test |^test result'
    [[ "${PIPESTATUS[0]}" -eq 0 ]] || status=1
    set -e
done

printf '\n| scenario | changes written | changes verified | duplicates | result |\n'
printf '|---|---:|---:|---:|---|\n'
# "checker" lines come from the verifier's own unit test, fed bad data on purpose.
grep -a '^FAULT-SUITE' "$out" | grep -av $'\tchecker\t' | while IFS=$'\t' read -r _ scenario written verified dups result; do
    printf '| %s | %s | %s | %s | %s |\n' "$scenario" "$written" "$verified" "$dups" "$result"
done
exit "$status"
