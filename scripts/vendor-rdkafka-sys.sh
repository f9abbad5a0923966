#!/usr/bin/env bash
# Re-creates vendor/rdkafka-sys from a published rdkafka-sys crate:
# unpack, trim what the CMake build does not read, apply vendor/patches.
# See vendor/README.md.
#
#   scripts/vendor-rdkafka-sys.sh 4.10.0+2.12.1
set -euo pipefail
version="${1:?usage: $0 <rdkafka-sys version, e.g. 4.10.0+2.12.1>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

crate=$(find "$cargo_home/registry/cache" -name "rdkafka-sys-$version.crate" 2>/dev/null | head -1)
if [[ -z "$crate" ]]; then
    # Have cargo download it: a throwaway project depending on that version.
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$scratch/src" && touch "$scratch/src/lib.rs"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nrdkafka-sys = "=%s"\n' \
        "$version" > "$scratch/Cargo.toml"
    cargo fetch --manifest-path "$scratch/Cargo.toml"
    crate=$(find "$cargo_home/registry/cache" -name "rdkafka-sys-$version.crate" | head -1)
fi

work=$(mktemp -d)
tar -xzf "$crate" -C "$work"
src="$work/rdkafka-sys-$version"
lib="$src/librdkafka"
rm -rf "$lib"/{tests,examples,win32,debian} \
    "$lib"/{CHANGELOG.md,CONFIGURATION.md,INTRODUCTION.md,STATISTICS.md} \
    "$lib"/{Doxyfile,mainpage.doxy,README.win32,vcpkg.json,service.yml,dev-conf.sh}
find "$lib/packaging" -mindepth 1 -maxdepth 1 ! -name cmake -exec rm -rf {} +
for patch in "$root"/vendor/patches/*.patch; do
    patch -d "$src" -p1 --no-backup-if-mismatch < "$patch"
done
rm -rf "$root/vendor/rdkafka-sys"
mv "$src" "$root/vendor/rdkafka-sys"
rm -rf "$work"
echo "vendor/rdkafka-sys is rdkafka-sys $version with $(ls "$root"/vendor/patches/*.patch | wc -l) patch(es)"
