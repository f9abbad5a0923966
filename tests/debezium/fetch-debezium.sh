#!/usr/bin/env bash
# Pre-fetches Debezium for the differential test (tests/debezium_diff.rs) into
# the same cache as testcontainers/fetch-services.sh:
#   <cache>/debezium-<v>/libs/            the embedded engine, the PostgreSQL connector,
#                                         Kafka Connect's JsonConverter (mvn, pom.xml here)
#   <cache>/debezium-<v>/runner-<sha>/    DebeziumDiffRunner.class, compiled with javac
#                                         (<sha>: of its source, so an edit recompiles)
# <cache> is $PGCDC_SERVICES_CACHE, else $XDG_CACHE_HOME/pgcdc-kafka, else
# $HOME/.cache/pgcdc-kafka. Idempotent: what is complete is left alone. The
# last line of stdout is the runner's Java classpath.
# Needs `mvn` and a JDK 17+ `javac` (Debian: maven openjdk-17-jdk-headless).
set -euo pipefail

DEBEZIUM_VERSION=3.6.1.Final # keep in step with pom.xml and tests/debezium_diff.rs

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${PGCDC_SERVICES_CACHE:-}" ]; then cache=$PGCDC_SERVICES_CACHE
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache=$XDG_CACHE_HOME/pgcdc-kafka
else cache=$HOME/.cache/pgcdc-kafka
fi

for tool in mvn javac sha256sum; do
  command -v "$tool" >/dev/null || {
    echo "fetch-debezium: $tool not found; apt-get install maven openjdk-17-jdk-headless" >&2
    exit 1
  }
done

base=$cache/debezium-$DEBEZIUM_VERSION
libs=$base/libs
if [ -f "$libs/debezium-embedded-$DEBEZIUM_VERSION.jar" ] \
  && [ -f "$libs/debezium-connector-postgres-$DEBEZIUM_VERSION.jar" ]; then
  echo "fetch-debezium: debezium $DEBEZIUM_VERSION classpath present in $libs" >&2
else
  echo "fetch-debezium: resolving debezium $DEBEZIUM_VERSION into $libs" >&2
  mkdir -p "$base"
  rm -rf "$libs"
  tmp=$base/.libs.tmp-$$
  rm -rf "$tmp"
  (cd "$base" && mvn -B -q -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp") >&2
  mv "$tmp" "$libs"
fi

source=$here/DebeziumDiffRunner.java
sha=$(sha256sum "$source" | cut -c1-16)
runner=$base/runner-$sha
if [ ! -f "$runner/DebeziumDiffRunner.class" ]; then
  echo "fetch-debezium: compiling $source" >&2
  tmp=$base/.runner.tmp-$$
  rm -rf "$tmp"
  mkdir -p "$tmp"
  javac --release 17 -nowarn -cp "$libs/*" -d "$tmp" "$source" >&2
  rm -rf "$runner"
  mv "$tmp" "$runner"
fi
echo "$runner:$libs/*"
