{{/* The name of every object: the release's name, with "idmint" unless the release is called that already. */}}
{{- define "idmint.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select this release's pods. */}}
{{- define "idmint.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "idmint.labels" -}}
{{ include "idmint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Where the pod sees its config and its secrets. */}}
{{- define "idmint.configDir" -}}/etc/idmint/config{{- end -}}
{{- define "idmint.secretDir" -}}/etc/idmint/secrets{{- end -}}

{{/* The Secret holding the admin token: the operator's, or the chart's. */}}
{{- define "idmint.adminSecret" -}}
{{- default (printf "%s-tokens" (include "idmint.fullname" .)) .Values.adminToken.existingSecret -}}
{{- end -}}
{{- define "idmint.adminSecretKey" -}}
{{- if .Values.adminToken.existingSecret -}}{{ .Values.adminToken.existingSecretKey }}{{- else -}}admin-token{{- end -}}
{{- end -}}
{{- define "idmint.metricsSecret" -}}
{{- default (printf "%s-tokens" (include "idmint.fullname" .)) .Values.metricsToken.existingSecret -}}
{{- end -}}
{{- define "idmint.metricsSecretKey" -}}
{{- if .Values.metricsToken.existingSecret -}}{{ .Values.metricsToken.existingSecretKey }}{{- else -}}metrics-token{{- end -}}
{{- end -}}

{{/*
The remote services the pods log in to, by the file their password is
mounted as: each store, the coordinator (mode "coordinator") and the
witness (a URL). Each has field (its values path), url, and optionally
password or existingSecret/existingSecretKey. Rendered as YAML; read back
with fromYaml.
*/}}
{{- define "idmint.remotes" -}}
{{- $out := dict -}}
{{- range $name, $s := .Values.stores -}}
{{- $_ := set $out (printf "store-%s" $name) (merge (dict "field" (printf "stores.%s" $name)) $s) -}}
{{- end -}}
{{- if eq .Values.workerIds.mode "coordinator" -}}
{{- $_ := set $out "coordinator" (merge (dict "field" "coordinator") .Values.coordinator) -}}
{{- end -}}
{{- if and .Values.witness.url (ne .Values.witness.url "none") -}}
{{- $_ := set $out "witness" (merge (dict "field" "witness") .Values.witness) -}}
{{- end -}}
{{- if and .Values.region.name .Values.region.registry.url -}}
{{- $_ := set $out "region-registry" (merge (dict "field" "region.registry") .Values.region.registry) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Whether a remote has a password to mount. */}}
{{- define "idmint.hasPassword" -}}
{{- if and .password .existingSecret -}}
{{- fail (printf "%s: give password or existingSecret, not both" .field) -}}
{{- end -}}
{{- if or .password .existingSecret -}}true{{- end -}}
{{- end -}}

{{/* A remote's URL with password_file= naming its mounted password, when it has one. */}}
{{- define "idmint.remoteURL" -}}
{{- $url := .remote.url | required (printf "%s.url is required" .remote.field) -}}
{{- if include "idmint.hasPassword" .remote -}}
{{- if contains "password_file=" $url -}}
{{- fail (printf "%s.url names password_file itself; give the password in %s.password or %s.existingSecret instead" .remote.field .remote.field .remote.field) -}}
{{- end -}}
{{- printf "%s%spassword_file=%s/%s" $url (ternary "&" "?" (contains "?" $url)) (include "idmint.secretDir" .root) .file -}}
{{- else -}}
{{- $url -}}
{{- end -}}
{{- end -}}

{{/* The readiness probe must see a draining pod before it stops accepting. */}}
{{- define "idmint.checkDrain" -}}
{{- $seen := mul .Values.probes.readiness.periodSeconds .Values.probes.readiness.failureThreshold -}}
{{- if ge (int $seen) (int .Values.drain.drainPeriodSeconds) -}}
{{- fail (printf "probes.readiness: periodSeconds x failureThreshold = %d s, want less than drain.drainPeriodSeconds (%d s): the pod would stop accepting before its readiness probe says it is not ready" (int $seen) (int .Values.drain.drainPeriodSeconds)) -}}
{{- end -}}
{{- end -}}
