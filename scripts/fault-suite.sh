#!/usr/bin/env bash
# The fault-injection suite (tests/crash_recovery/) with its summary table.
#
#   scripts/fault-suite.sh          the short form CI runs as part of `cargo test`
#   PGCDC_FAULT_ROUNDS=100 scripts/fault-suite.sh
#                                   the same scenarios longer: 100 kill -9
#                                   rounds, the other scenarios' rounds
#                                   scaled from it
#   scripts/fault-suite.sh --soak   the long soak (tests/crash_recovery/soak.rs):
#                                   one connector through PGCDC_SOAK_ROUNDS
#                                   (default 60) rounds of mixed faults
#                                   (kill -9, broker kill, PostgreSQL
#                                   immediate restart, network stall and
#                                   reset), duplicates per fault kind
#                                   against their bounds
#
# Extra arguments go to the test binary (e.g. a test name filter). Every
# scenario prints a FAULT-SUITE line (scenario, changes written, changes
# verified, duplicates, result), the soak a SOAK line per fault kind; this
# collects them into tables.
set -euo pipefail
cd "$(dirname "$0")/.."

selection=()
if [[ "${1:-}" == "--soak" ]]; then
    shift
    selection=(--ignored soak_mixed_faults)
fi

out="$(mktemp -t fault-suite.XXXXXX)"
# The whole output is kept when a scenario fails (its list of problems is
# not in the summary); otherwise it is removed.
trap '[[ $status -eq 0 ]] && rm -f "$out" || echo "whole output kept in $out" >&2' EXIT
status=0
set +e
cargo test --locked --test crash_recovery -- --nocapture --test-threads=1 "${selection[@]}" "$@" \
    2>&1 | tee -a "$out" | grep -aE '^\[|^test |^test result'
[[ "${PIPESTATUS[0]}" -eq 0 ]] || status=1
set -e

printf '\n| scenario | changes written | changes verified | duplicates | result |\n'
printf '|---|---:|---:|---:|---|\n'
# "checker" lines come from the verifier's own unit test, fed bad data on purpose.
grep -a '^FAULT-SUITE' "$out" | grep -av $'\tchecker\t' | while IFS=$'\t' read -r _ scenario written verified dups result; do
    printf '| %s | %s | %s | %s | %s |\n' "$scenario" "$written" "$verified" "$dups" "$result"
done
if grep -aq '^SOAK' "$out"; then
    printf '\n| fault | rounds | records read | duplicates | worst round | bound per round | skipped as delivered | tail reads failed | result |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---|\n'
    grep -a '^SOAK' "$out" | while IFS=$'\t' read -r _ fault rounds records dups worst bound skipped failed result; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
            "$fault" "$rounds" "$records" "$dups" "$worst" "$bound" "$skipped" "$failed" "$result"
    done
fi
exit "$status"
