{{/* Labels Helm conventions expect on every object, beside the app.kubernetes.io/name of config/. */}}
{{- define "quartet-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The manager image: by digest when image.digest is set (a pinned, verifiable image), else by tag. */}}
{{- define "quartet-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}
{{- end -}}

{{/* The Secret the webhook server reads its certificate from. */}}
{{- define "quartet-operator.webhookSecretName" -}}
{{- if eq .Values.webhook.certificates.source "secret" -}}
{{ required "webhook.certificates.secretName is required when webhook.certificates.source is secret" .Values.webhook.certificates.secretName }}
{{- else if eq .Values.webhook.certificates.source "operator" -}}
{{ .Values.webhook.certificates.secretName | default "webhook-server-cert" }}
{{- else -}}
webhook-server-cert
{{- end -}}
{{- end -}}

{{- define "quartet-operator.certManager" -}}
{{- if eq .Values.webhook.certificates.source "cert-manager" }}true{{ end -}}
{{- end -}}

{{/* The environment variable of a manager flag: QUARTET_ and the name upper-cased, '-' and '.' as '_'. */}}
{{- define "quartet-operator.envName" -}}
QUARTET_{{ . | upper | replace "-" "_" | replace "." "_" }}
{{- end -}}
