#!/usr/bin/env bash
# Fuzzes the pgoutput decoder and the replication framing (fuzz/), each for
# PGCDC_FUZZ_SECONDS (default 60), on one pinned nightly toolchain so that a
# new nightly cannot break or change CI between two runs of the same commit.
# `.ci/run` calls it after the tests; it also runs alone.
#
# Bounded in time: libFuzzer stops each target after PGCDC_FUZZ_SECONDS and
# reports any single input slower than 10 s as a hang (its default allows
# 20 min per input), and the whole of each target (build included) is
# killed after PGCDC_FUZZ_SECONDS + 15 min. A crash, a hang or the overall
# limit fails the step; a crashing input is left in fuzz/artifacts/.
# Without the toolchain (and none installable) or cargo-fuzz, the step prints
# a SKIPPED line instead of failing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The nightly libFuzzer builds with. To move it: pick a date whose nightly
# has rustc and cargo (rustup toolchain install nightly-YYYY-MM-DD), run this
# script, commit the new date.
pinned=nightly-2026-05-20
seconds="${PGCDC_FUZZ_SECONDS:-60}"
[[ $seconds =~ ^[0-9]+$ ]] || { echo "PGCDC_FUZZ_SECONDS must be whole seconds, got '$seconds'" >&2; exit 2; }
cache="${PGCDC_SERVICES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pgcdc-kafka}"

# The dist date of an installed toolchain, from its channel manifest (never
# `rustc +name` on a missing one: some rustup versions would install it).
dist_date() {
  local sysroot
  rustup toolchain list | grep -q "^$1-" || return 1
  sysroot=$(rustc +"$1" --print sysroot 2>/dev/null) || return 1
  sed -n 's/^date = "\(.*\)"$/\1/p' "$sysroot/lib/rustlib/multirust-channel-manifest.toml" 2>/dev/null
}

# The pinned toolchain, or the plain `nightly` channel when it is that very
# build (no second download of the same compiler).
toolchain=""
if dist_date "$pinned" >/dev/null; then
  toolchain=$pinned
elif [[ $(dist_date nightly || true) == "${pinned#nightly-}" ]]; then
  toolchain=nightly
elif rustup toolchain install "$pinned" --profile minimal; then
  toolchain=$pinned
fi
if [[ -z $toolchain ]]; then
  echo "SKIPPED fuzzing: $pinned is not installed and rustup could not install it"
  exit 0
fi
if ! command -v cargo-fuzz >/dev/null && ! cargo install cargo-fuzz --locked; then
  echo "SKIPPED fuzzing: cargo-fuzz is not installed and could not be installed"
  exit 0
fi
echo "fuzzing with $toolchain ($(rustc +"$toolchain" --version)), $seconds s per target"

start=$SECONDS
# The decoder, then the replication framing (which also decodes each
# XLogData payload it cuts out), each for the given time.
for target in pgoutput_decode replication_frame; do
  corpus="$cache/fuzz-corpus/$target"
  mkdir -p "$corpus"
  seeds=(); [[ -d fuzz/seeds/$target ]] && seeds=("fuzz/seeds/$target")
  if ! timeout --signal=INT --kill-after=30 $((seconds + 900)) \
    cargo +"$toolchain" fuzz run --target-dir "$cache/fuzz-target" "$target" \
      "$corpus" "${seeds[@]}" -- \
      -max_total_time="$seconds" -timeout=10 -print_final_stats=1; then
    echo "fuzzing $target failed (a crash or hang, see fuzz/artifacts/$target/, or over $((seconds + 900)) s)" >&2
    exit 1
  fi
done
echo "fuzzing took $((SECONDS - start)) s (build included)"
