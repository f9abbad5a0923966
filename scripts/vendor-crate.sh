#!/usr/bin/env bash
# Re-creates vendor/<crate> from a published crate: unpack it, trim what its
# build does not read, apply vendor/patches/<crate>/*.patch. See vendor/README.md.
#
#   scripts/vendor-crate.sh rdkafka-sys 4.10.0+2.12.1
set -euo pipefail
name="${1:?usage: $0 <crate> <version>}"
version="${2:?usage: $0 <crate> <version>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

crate=$(find "$cargo_home/registry/cache" -name "$name-$version.crate" 2>/dev/null | head -1)
if [[ -z "$crate" ]]; then
    # Have cargo download it: a throwaway project depending on that version.
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$scratch/src" && touch "$scratch/src/lib.rs"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n' \
        "$name" "$version" > "$scratch/Cargo.toml"
    cargo fetch --manifest-path "$scratch/Cargo.toml"
    crate=$(find "$cargo_home/registry/cache" -name "$name-$version.crate" | head -1)
fi

work=$(mktemp -d)
tar -xzf "$crate" -C "$work"
src="$work/$name-$version"
rm -rf "$src"/{.cargo,.github,.cargo-ok,.cargo_vcs_info.json,.gitignore,Cargo.lock}
if [[ "$name" == rdkafka-sys ]]; then
    lib="$src/librdkafka"
    rm -rf "$lib"/{tests,examples,win32,debian} \
        "$lib"/{CHANGELOG.md,CONFIGURATION.md,INTRODUCTION.md,STATISTICS.md} \
        "$lib"/{Doxyfile,mainpage.doxy,README.win32,vcpkg.json,service.yml,dev-conf.sh}
    find "$lib/packaging" -mindepth 1 -maxdepth 1 ! -name cmake -exec rm -rf {} +
fi
patches=("$root/vendor/patches/$name"/*.patch)
for patch in "${patches[@]}"; do
    patch -d "$src" -p1 --no-backup-if-mismatch < "$patch"
done
rm -rf "${root:?}/vendor/$name"
mv "$src" "$root/vendor/$name"
rm -rf "$work"
echo "vendor/$name is $name $version with ${#patches[@]} patch(es)"
