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

{{/* A store's URL with password_file= naming its mounted password, when it has one. */}}
{{- define "idmint.storeURL" -}}
{{- $url := .store.url | required (printf "stores.%s.url is required" .name) -}}
{{- if or .store.password .store.existingSecret -}}
{{- if contains "password_file=" $url -}}
{{- fail (printf "stores.%s.url names password_file itself; give the password in stores.%s.password or existingSecret instead" .name .name) -}}
{{- end -}}
{{- printf "%s%spassword_file=%s/store-%s" $url (ternary "&" "?" (contains "?" $url)) (include "idmint.secretDir" .root) .name -}}
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
