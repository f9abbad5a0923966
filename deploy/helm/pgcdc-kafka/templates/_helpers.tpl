{{/* Names and labels. */}}
{{- define "pgcdc.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pgcdc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pgcdc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pgcdc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pgcdc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "pgcdc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "pgcdc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pgcdc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "pgcdc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "pgcdc.fleetName" -}}
{{- default .Release.Name .Values.fleet.name -}}
{{- end -}}

{{/* Where a pipeline's PostgreSQL password file is mounted. */}}
{{- define "pgcdc.passwordDir" -}}
/etc/pgcdc/secrets/{{ . }}
{{- end -}}

{{/*
One pipeline's table of the config file: its values without the chart's own
keys, plus the password file when a Secret holds it (a path each pod
resolves: in a fleet, the configs topic holds the path, never the secret).
Called with one entry of .Values.pipelines.
*/}}
{{- define "pgcdc.pipelineTable" -}}
{{- $table := omit . "name" "passwordSecret" -}}
{{- if .passwordSecret -}}
{{- $_ := set $table "pg_password_file" (printf "%s/pg-password" (include "pgcdc.passwordDir" .name)) -}}
{{- end -}}
{{- toYaml $table -}}
{{- end -}}

{{/*
The config file: shared keys, [kafka], then [pipelines.<name>] for the
given pipelines (entries of .Values.pipelines; none for a fleet instance,
whose pipelines live in the configs topic). Called with
(dict "root" $ "pipelines" LIST).
*/}}
{{- define "pgcdc.configFile" -}}
{{- $root := .root -}}
{{- $file := deepCopy $root.Values.config -}}
{{- $_ := set $file "metrics_addr" (printf "0.0.0.0:%v" $root.Values.metrics.port) -}}
{{- with $root.Values.kafkaSaslPasswordSecret -}}
{{- $_ := set $file "kafka_sasl_password_file" "/etc/pgcdc/secrets/kafka/sasl-password" -}}
{{- end -}}
{{- if $root.Values.kafka -}}
{{- $_ := set $file "kafka" $root.Values.kafka -}}
{{- end -}}
{{- $pipelines := dict -}}
{{- range .pipelines -}}
{{- $_ := set $pipelines .name (include "pgcdc.pipelineTable" . | fromYaml) -}}
{{- end -}}
{{- if $pipelines -}}
{{- $_ := set $file "pipelines" $pipelines -}}
{{- end -}}
{{- toToml $file -}}
{{- end -}}

{{/* Checks on the values, with what to do. */}}
{{- define "pgcdc.validate" -}}
{{- if not .Values.pipelines -}}
{{- fail "values: `pipelines` is empty: declare at least one pipeline (pg_url, slot, topic_prefix)" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $p := .Values.pipelines -}}
{{- $name := toString $p.name -}}
{{- if not (regexMatch "^[a-z][a-z0-9_]{0,47}$" $name) -}}
{{- fail (printf "values: pipeline name %q: use 1-48 lowercase letters, digits or _, starting with a letter" $name) -}}
{{- end -}}
{{- if hasKey $seen $name -}}
{{- fail (printf "values: two pipelines are named %q: give each its own name" $name) -}}
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- if not $p.pg_url -}}
{{- fail (printf "values: pipeline %s: pg_url is missing: set the PostgreSQL URL (the password belongs in passwordSecret)" $name) -}}
{{- end -}}
{{- if regexMatch "^[a-z]+://[^/@]*:[^/@]*@" $p.pg_url -}}
{{- fail (printf "values: pipeline %s: pg_url holds a password: remove it from the URL and name a Secret in its passwordSecret" $name) -}}
{{- end -}}
{{- if not $p.topic_prefix -}}
{{- fail (printf "values: pipeline %s: topic_prefix is missing: set the prefix of its topics" $name) -}}
{{- end -}}
{{- with $p.passwordSecret -}}
{{- if or (not .name) (not .key) -}}
{{- fail (printf "values: pipeline %s: passwordSecret needs both `name` and `key`" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.fleet.enabled (lt (int .Values.fleet.replicas) 1) -}}
{{- fail "values: fleet.replicas must be at least 1" -}}
{{- end -}}
{{- end -}}
