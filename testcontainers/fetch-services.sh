#!/usr/bin/env bash
# Pre-fetches what pgcdc-testcontainers runs, into the same cache as its Rust
# code (src/cache.rs), so tests start without downloading:
#   <cache>/kafka-<v>/libs/                 Kafka's runtime classpath (mvn, maven/kafka-pom.xml)
#   <cache>/apicurio-<v>/*-all.tar.gz       Apicurio Registry's runnable archive
#   <cache>/apicurio-<v>/app/               ... extracted (holds quarkus-run.jar)
# <cache> is $PGCDC_SERVICES_CACHE, else $XDG_CACHE_HOME/pgcdc-kafka, else
# $HOME/.cache/pgcdc-kafka. Idempotent: what is complete is left alone.
# Needs `mvn`, `java` and `tar` (Debian: apt-get install maven openjdk-17-jre-headless).
# Usage: fetch-services.sh [--no-registry]
set -euo pipefail

KAFKA_VERSION=4.1.1    # keep in step with KAFKA_VERSION in src/cache.rs
REGISTRY_VERSION=3.3.3 # keep in step with REGISTRY_VERSION in src/cache.rs

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cache-dir.sh
. "$here/cache-dir.sh"
need_tools fetch-services "apt-get install maven openjdk-17-jre-headless" mvn java tar

kafka=$cache/kafka-$KAFKA_VERSION
libs=$kafka/libs
if [ -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ] && [ -f "$libs/kafka-clients-$KAFKA_VERSION.jar" ]; then
  echo "fetch-services: kafka $KAFKA_VERSION classpath present in $libs"
else
  echo "fetch-services: resolving kafka $KAFKA_VERSION into $libs"
  mkdir -p "$kafka"
  rm -rf "$libs"
  tmp=$kafka/.libs.tmp-$$
  rm -rf "$tmp"
  (cd "$kafka" && mvn -B -q -Dstyle.color=never -f "$here/maven/kafka-pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$tmp")
  mv "$tmp" "$libs"
fi

if [ "${1:-}" = "--no-registry" ]; then exit 0; fi

registry=$cache/apicurio-$REGISTRY_VERSION
archive=$registry/apicurio-registry-app-$REGISTRY_VERSION-all.tar.gz
app=$registry/app
if [ -n "$(find "$app" -maxdepth 3 -name quarkus-run.jar -print -quit 2>/dev/null)" ]; then
  echo "fetch-services: apicurio registry $REGISTRY_VERSION present in $app"
  exit 0
fi
mkdir -p "$registry"
if [ ! -f "$archive" ]; then
  echo "fetch-services: downloading apicurio registry $REGISTRY_VERSION (about 160 MB)"
  tmp=$registry/.download.tmp-$$
  rm -rf "$tmp"
  (cd "$registry" && mvn -B -q -Dstyle.color=never dependency:copy \
    -Dartifact="io.apicurio:apicurio-registry-app:$REGISTRY_VERSION:tar.gz:all" \
    -DoutputDirectory="$tmp")
  mv "$tmp/$(basename "$archive")" "$archive"
  rm -rf "$tmp"
fi
echo "fetch-services: extracting $archive"
tmp=$registry/.app.tmp-$$
rm -rf "$tmp" "$app"
mkdir -p "$tmp"
tar -xzf "$archive" -C "$tmp"
mv "$tmp" "$app"
echo "fetch-services: done; the registry needs Java 21+ to run (set PGCDC_JAVA_HOME if not found)"
