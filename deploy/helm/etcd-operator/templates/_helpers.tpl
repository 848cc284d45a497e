{{- define "etcd-operator.name" -}}
{{- default "etcd-supervisor" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "etcd-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "etcd-operator.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "etcd-operator.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "etcd-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etcd-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "etcd-operator.labels" -}}
{{ include "etcd-operator.selectorLabels" . }}
app.kubernetes.io/part-of: etcd-supervisor
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "etcd-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "etcd-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* backupVolume (values.yaml): the operator container's mount and the pod's volume, or nothing. */}}
{{- define "etcd-operator.backupMount" -}}
{{- if .Values.backupVolume.enabled -}}
- name: backups
  mountPath: {{ .Values.backupVolume.mountPath }}
{{- end -}}
{{- end -}}

{{- define "etcd-operator.backupVolume" -}}
{{- if .Values.backupVolume.enabled -}}
- name: backups
  persistentVolumeClaim:
    claimName: {{ .Values.backupVolume.existingClaim | default (printf "%s-backups" (include "etcd-operator.fullname" .)) }}
{{- end -}}
{{- end -}}
