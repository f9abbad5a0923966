#!/usr/bin/env bash
# Renders the Helm chart (deploy/helm/pgcdc-kafka) with its default values
# and with the fleet example, then checks what can be checked without a
# cluster:
#   - `helm lint --strict` on both;
#   - every rendered manifest against the Kubernetes API's JSON schemas,
#     strictly (unknown fields are errors), with kubernetes-validate;
#   - the ServiceMonitor (a CRD, not in those schemas) for its required
#     fields;
#   - each config file the chart renders, parsed by the connector itself
#     (`pgcdc-kafka config show`) when a binary is at hand (PGCDC_BIN, or
#     the debug build in CARGO_TARGET_DIR);
#   - values the chart must refuse (a password in pg_url, no pipelines) fail
#     with a message that says what to do.
# The tools are pinned and cached: helm built with `go install` (the Go
# module proxy), kubernetes-validate from PyPI in a virtualenv. Without Go,
# the step prints a SKIPPED line instead of failing.
set -euo pipefail
cd "$(dirname "$0")/.."

helm_version=v4.3.2
validate_version=1.37.0
kubernetes_version=1.33.0
chart=deploy/helm/pgcdc-kafka
cache="${PGCDC_SERVICES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pgcdc-kafka}"
tools=$cache/tools
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

helm=$tools/helm-$helm_version/helm
if [[ ! -x $helm ]]; then
  if ! command -v go >/dev/null; then
    echo "SKIPPED: no Go toolchain to build helm $helm_version; the chart was not rendered"
    exit 0
  fi
  echo "building helm $helm_version (once, cached in $tools)"
  GOBIN=$tools/helm-$helm_version GOFLAGS=-mod=mod go install "helm.sh/helm/v4/cmd/helm@$helm_version"
fi
venv=$tools/kubernetes-validate-$validate_version
if [[ ! -x $venv/bin/kubernetes-validate ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$validate_version"
fi
python=$venv/bin/python   # has PyYAML (kubernetes-validate needs it)

bin="${PGCDC_BIN:-${CARGO_TARGET_DIR:-target}/debug/pgcdc-kafka}"

for case in default fleet; do
  values=()
  [[ $case == fleet ]] && values=(-f "$chart/examples/fleet.yaml")
  echo "-- chart, $case values"
  "$helm" lint --strict "$chart" "${values[@]}"
  "$helm" template cdc "$chart" "${values[@]}" >"$out/$case.yaml"
  "$venv/bin/kubernetes-validate" --strict -k "$kubernetes_version" "$out/$case.yaml"
  # The ServiceMonitor and the config files the chart rendered.
  "$python" - "$out/$case.yaml" "$out/$case" <<'PY'
import os, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
os.makedirs(sys.argv[2], exist_ok=True)
for d in docs:
    kind, name = d["kind"], d["metadata"]["name"]
    if kind == "ServiceMonitor":
        assert d["apiVersion"] == "monitoring.coreos.com/v1", d["apiVersion"]
        eps = d["spec"]["endpoints"]
        assert eps and all(e.get("port") for e in eps), "ServiceMonitor endpoints need a port"
        assert d["spec"]["selector"]["matchLabels"], "ServiceMonitor selects nothing"
        print(f"{name}: ServiceMonitor fields present")
    if kind == "ConfigMap":
        for key, text in d["data"].items():
            open(os.path.join(sys.argv[2], key), "w").write(text)
PY
  if [[ -x $bin ]]; then
    # A fleet instance's file holds no pipeline: with the pipelines that
    # `fleet apply` stores it makes one multi-pipeline file, which is what
    # each instance runs (a part of) in the end.
    if [[ -f $out/$case/pipelines.toml ]]; then
      cat "$out/$case/fleet.toml" "$out/$case/pipelines.toml" >"$out/$case/fleet-with-pipelines.toml"
      rm "$out/$case/fleet.toml" "$out/$case/pipelines.toml"
    fi
    for file in "$out/$case"/*.toml; do
      # The secrets the pods mount, as files here.
      sed -i "s|/etc/pgcdc/secrets/|$out/secrets/|g" "$file"
      grep -o "$out/secrets/[a-z0-9_/-]*" "$file" | while read -r secret; do
        mkdir -p "$(dirname "$secret")" && echo secret >"$secret"
      done
      echo "$(basename "$file"): parsed by $bin config show"
      "$bin" config show --config "$file" >/dev/null
    done
  else
    echo "no connector binary at $bin (set PGCDC_BIN): config files not parsed"
  fi
done

echo "-- values the chart refuses"
refuse() {
  local expect=$1 values=$2
  printf '%s\n' "$values" >"$out/refused-values.yaml"
  if "$helm" template cdc "$chart" -f "$out/refused-values.yaml" >/dev/null 2>"$out/refused.err"; then
    echo "the chart rendered values it must refuse: $values" >&2; exit 1
  fi
  grep -q -- "$expect" "$out/refused.err" || { cat "$out/refused.err" >&2; echo "expected: $expect" >&2; exit 1; }
  echo "refused: $expect"
}
one='{name: app, pg_url: "postgres://cdc@db/app", topic_prefix: app}'
refuse "holds a password" 'pipelines: [{name: app, pg_url: "postgres://cdc:secret@db/app", topic_prefix: app}]'
refuse "pipeline name" 'pipelines: [{name: App, pg_url: "postgres://cdc@db/app", topic_prefix: app}]'
refuse "pipeline name" 'pipelines: [{pg_url: "postgres://cdc@db/app", topic_prefix: app}]'
refuse "topic_prefix is missing" 'pipelines: [{name: app, pg_url: "postgres://cdc@db/app"}]'
refuse "two pipelines are named" "pipelines: [$one, $one]"
refuse "needs both" 'pipelines: [{name: app, pg_url: "postgres://cdc@db/app", topic_prefix: app, passwordSecret: {name: s}}]'
refuse "is empty" 'pipelines: []'
echo "chart checks passed"
