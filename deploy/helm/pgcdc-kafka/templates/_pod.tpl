{{/*
The pod template shared by the per-pipeline Deployments and the fleet's.
Called with (dict "root" $ "component" NAME "configMapKey" KEY "checksum" SUM
"args" LIST "secrets" PIPELINES), PIPELINES being the entries of
.Values.pipelines whose Secrets the pod mounts.
*/}}
{{- define "pgcdc.podTemplate" -}}
{{- $root := .root -}}
metadata:
  labels:
    {{- include "pgcdc.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $root.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A change to this pod's config file restarts it (and only it).
    checksum/config: {{ .checksum }}
    {{- with $root.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "pgcdc.serviceAccountName" $root }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  containers:
    - name: pgcdc-kafka
      image: {{ include "pgcdc.image" $root | quote }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        {{- range .args }}
        - {{ . | quote }}
        {{- end }}
        {{- range $root.Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      env:
        - name: PGCDC_CONFIG
          value: /etc/pgcdc/config.toml
        - name: PGCDC_LOG_FORMAT
          value: {{ $root.Values.logFormat | quote }}
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: metrics
          containerPort: {{ $root.Values.metrics.port }}
          protocol: TCP
      {{- with $root.Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.startupProbe }}
      startupProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml $root.Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/pgcdc/config.toml
          subPath: {{ .configMapKey }}
          readOnly: true
        {{- range .secrets }}
        - name: {{ printf "pg-%s" .name | replace "_" "-" }}
          mountPath: {{ include "pgcdc.passwordDir" .name }}
          readOnly: true
        {{- end }}
        {{- if $root.Values.kafkaSaslPasswordSecret }}
        - name: kafka-sasl
          mountPath: /etc/pgcdc/secrets/kafka
          readOnly: true
        {{- end }}
        # Scratch space (the root file system is read-only).
        - name: tmp
          mountPath: /tmp
        {{- with $root.Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "pgcdc.fullname" $root }}
    {{- range .secrets }}
    - name: {{ printf "pg-%s" .name | replace "_" "-" }}
      secret:
        secretName: {{ .passwordSecret.name }}
        items:
          - key: {{ .passwordSecret.key }}
            path: pg-password
    {{- end }}
    {{- with $root.Values.kafkaSaslPasswordSecret }}
    - name: kafka-sasl
      secret:
        secretName: {{ .name }}
        items:
          - key: {{ .key }}
            path: sasl-password
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 1Gi
    {{- with $root.Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The pipelines whose password comes from a Secret (JSON). */}}
{{- define "pgcdc.secretPipelines" -}}
{{- $with := list -}}
{{- range .Values.pipelines -}}
{{- if .passwordSecret -}}{{- $with = append $with . -}}{{- end -}}
{{- end -}}
{{- toJson $with -}}
{{- end -}}
