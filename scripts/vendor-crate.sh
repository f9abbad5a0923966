#!/usr/bin/env bash
# Re-creates vendor/<crate> from a published crate: unpack it, trim what its
# build does not read, apply vendor/patches/<crate>/*.patch. See vendor/README.md.
#
#   scripts/vendor-crate.sh rdkafka-sys 4.10.0+2.12.1
#
# With --check, nothing is replaced: the copy is re-created in a temporary
# directory and compared with vendor/<crate>; any difference (a file edited
# by hand, a patch not in vendor/patches/) fails with the diff. Without a
# version, --check reads it from vendor/<crate>/Cargo.toml. `.ci/run` checks
# every vendored crate this way.
#
#   scripts/vendor-crate.sh --check rdkafka-sys
set -euo pipefail
check=false
if [[ "${1:-}" == --check ]]; then check=true; shift; fi
name="${1:?usage: $0 [--check] <crate> <version>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${2:-}" && $check == true ]]; then
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/vendor/$name/Cargo.toml" | head -1)
fi
version="${2:-${version:?usage: $0 [--check] <crate> <version>}}"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# (No registry cache at all on a fresh machine: find fails, which is "not there".)
crate=$( (find "$cargo_home/registry/cache" -name "$name-$version.crate" 2>/dev/null || true) | head -1)
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
if [[ $check == true ]]; then
    if diff -r "$src" "$root/vendor/$name" > "$work/diff"; then
        echo "vendor/$name is exactly $name $version with ${#patches[@]} patch(es)"
        rm -rf "$work"
        exit 0
    fi
    echo "vendor/$name differs from $name $version with vendor/patches/$name/*.patch:" >&2
    head -200 "$work/diff" >&2
    echo "put every change in a patch under vendor/patches/$name/ and re-create the copy with $0 $name $version" >&2
    rm -rf "$work"
    exit 1
fi
rm -rf "${root:?}/vendor/$name"
mv "$src" "$root/vendor/$name"
rm -rf "$work"
echo "vendor/$name is $name $version with ${#patches[@]} patch(es)"
