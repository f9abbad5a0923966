# Sourced by the fetch scripts (testcontainers/fetch-services.sh,
# tests/debezium/fetch-debezium.sh): sets `cache` to the download cache that
# src/cache.rs uses ($PGCDC_SERVICES_CACHE, else $XDG_CACHE_HOME/pgcdc-kafka,
# else $HOME/.cache/pgcdc-kafka), and defines `need_tools NAME HINT TOOL...`,
# which stops with HINT when a tool is not on PATH.
if [ -n "${PGCDC_SERVICES_CACHE:-}" ]; then cache=$PGCDC_SERVICES_CACHE
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache=$XDG_CACHE_HOME/pgcdc-kafka
else cache=$HOME/.cache/pgcdc-kafka
fi

need_tools() {
  local name=$1 hint=$2 tool
  shift 2
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "$name: $tool not found; $hint" >&2
      exit 1
    }
  done
}
