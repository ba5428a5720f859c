{{/* Names, labels and the parts every runonce pod shares: image, Kafka settings, volumes. */}}

{{- define "runonce.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "runonce.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "worker") */}}
{{- define "runonce.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "runonce.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* the environment of every runonce container */}}
{{- define "runonce.env" -}}
- name: RUNONCE_BOOTSTRAP
  value: {{ required "kafka.bootstrapServers is required: the brokers, host:port,..." .Values.kafka.bootstrapServers | quote }}
- name: RUNONCE_PARTITIONS
  value: {{ .Values.kafka.partitions | quote }}
- name: RUNONCE_HOME
  value: /var/lib/runonce
- name: RUNONCE_METRICS_HOST
  value: "0.0.0.0"
{{- if .Values.kafka.configSecret }}
- name: RUNONCE_KAFKA_CONFIG
  value: /etc/runonce/kafka/client.properties
{{- end }}
{{- if .Values.kafka.sasl.username }}
- name: RUNONCE_SASL_USERNAME
  value: {{ .Values.kafka.sasl.username | quote }}
- name: RUNONCE_SASL_PASSWORD_FILE
  value: /etc/runonce/sasl/password
{{- end }}
{{- if .Values.policies }}
- name: RUNONCE_POLICY_FILE
  value: /etc/runonce/config/policies.toml
{{- end }}
{{- end -}}

{{- define "runonce.volumeMounts" -}}
{{- if .Values.kafka.configSecret }}
- {name: kafka-config, mountPath: /etc/runonce/kafka, readOnly: true}
{{- end }}
{{- if .Values.kafka.tlsSecret }}
- {name: kafka-tls, mountPath: /etc/runonce/kafka-tls, readOnly: true}
{{- end }}
{{- if .Values.kafka.sasl.passwordSecret }}
- {name: sasl, mountPath: /etc/runonce/sasl, readOnly: true}
{{- end }}
- {name: config, mountPath: /etc/runonce/config, readOnly: true}
{{- end -}}

{{- define "runonce.volumes" -}}
{{- if .Values.kafka.configSecret }}
- name: kafka-config
  secret: {secretName: {{ .Values.kafka.configSecret | quote }}}
{{- end }}
{{- if .Values.kafka.tlsSecret }}
- name: kafka-tls
  secret: {secretName: {{ .Values.kafka.tlsSecret | quote }}}
{{- end }}
{{- if .Values.kafka.sasl.passwordSecret }}
- name: sasl
  secret:
    secretName: {{ .Values.kafka.sasl.passwordSecret | quote }}
    items: [{key: {{ .Values.kafka.sasl.passwordKey | quote }}, path: password}]
{{- end }}
- name: config
  configMap: {name: {{ include "runonce.fullname" . }}-config}
{{- end -}}

{{/* probes on a port: (dict "port" 9464) */}}
{{- define "runonce.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: 5
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}}
  periodSeconds: 5
  failureThreshold: 2
{{- end -}}

{{- define "runonce.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
{{- end -}}

{{- define "runonce.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{- define "runonce.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
