{{/* Names, labels and the parts every runonce pod shares: image, Kafka settings, volumes. */}}

{{/* at most 40 characters: <fullname>-executor-<vendor> must fit 52 (a StatefulSet's pods get a
controller-revision-hash label of its name + 11 characters, and a label value holds 63) */}}
{{- define "runonce.fullname" -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else -}}
{{- $name := .Values.nameOverride | default .Chart.Name -}}
{{- if contains $name .Release.Name -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- end -}}

{{/* a StatefulSet's name: (dict "root" $ "suffix" "worker"), 52 characters at most */}}
{{- define "runonce.setName" -}}
{{- printf "%s-%s" (include "runonce.fullname" .root) .suffix | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "runonce.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ .Values.serviceAccount.name | default (include "runonce.fullname" .) }}
{{- else -}}{{ .Values.serviceAccount.name | default "default" }}{{- end -}}
{{- end -}}

{{- define "runonce.labels" -}}
app.kubernetes.io/name: {{ .Values.nameOverride | default .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "worker") */}}
{{- define "runonce.selector" -}}
app.kubernetes.io/name: {{ .root.Values.nameOverride | default .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "runonce.image" -}}
{{- if .Values.image.digest -}}{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- end -}}

{{/* a component's SASL principal: (dict "root" $ "who" "worker"): its own, else kafka.sasl's */}}
{{- define "runonce.principal" -}}
{{- $all := .root.Values.kafka.sasl -}}
{{- $own := index $all .who | default dict -}}
{{- $user := $own.username | default $all.username -}}
{{- $secret := $own.passwordSecret | default (ternary $all.passwordSecret "" (not $own.username)) -}}
{{- toJson (dict "username" $user "passwordSecret" $secret "passwordKey" ($own.passwordKey | default $all.passwordKey)) -}}
{{- end -}}

{{/* the gateway's reader principal, when it has one of its own: (dict "root" $ "who" "gateway");
else a principal with no username (the gateway reads as it writes) */}}
{{- define "runonce.reader" -}}
{{- $p := include "runonce.principal" . | fromJson -}}
{{- $r := include "runonce.principal" (dict "root" .root "who" "gatewayReader") | fromJson -}}
{{- if and (eq .who "gateway") $r.username (ne $r.username $p.username) -}}{{ toJson $r }}
{{- else -}}{{ toJson (dict "username" "" "passwordSecret" "" "passwordKey" "") }}{{- end -}}
{{- end -}}

{{/* the environment of every runonce container: (dict "root" $ "who" "worker") */}}
{{- define "runonce.env" -}}
{{- $root := .root -}}
{{- $p := include "runonce.principal" . | fromJson -}}
- name: RUNONCE_BOOTSTRAP
  value: {{ required "kafka.bootstrapServers is required: the brokers, host:port,..." $root.Values.kafka.bootstrapServers | quote }}
- name: RUNONCE_PARTITIONS
  value: {{ $root.Values.kafka.partitions | quote }}
- name: RUNONCE_HOME
  value: /var/lib/runonce
- name: RUNONCE_METRICS_HOST
  value: "0.0.0.0"
{{- if $root.Values.kafka.configSecret }}
- name: RUNONCE_KAFKA_CONFIG
  value: /etc/runonce/kafka/client.properties
{{- end }}
{{- if $p.username }}
- name: RUNONCE_SASL_USERNAME
  value: {{ $p.username | quote }}
{{- if $p.passwordSecret }}
- name: RUNONCE_SASL_PASSWORD_FILE
  value: /etc/runonce/sasl/password
{{- end }}
{{- end }}
{{- $r := include "runonce.reader" . | fromJson -}}
{{- if $r.username }}
- name: RUNONCE_READER_SASL_USERNAME
  value: {{ $r.username | quote }}
{{- if $r.passwordSecret }}
- name: RUNONCE_READER_SASL_PASSWORD_FILE
  value: /etc/runonce/sasl-reader/password
{{- end }}
{{- end }}
{{- if and $root.Values.receipts.keySecret (has .who (list "worker" "executors")) }}
- name: RUNONCE_RECEIPTS_KEY
  value: /etc/runonce/receipts/receipts.pem
{{- end }}
{{- if and $root.Values.policies (ne .who "topics") }}
- name: RUNONCE_POLICY_FILE
  value: /etc/runonce/config/policies.toml
{{- end }}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* mounts: (dict "root" $ "who" "worker"); the topics Job mounts no ConfigMap of the release */}}
{{- define "runonce.volumeMounts" -}}
{{- $root := .root -}}
{{- $p := include "runonce.principal" . | fromJson -}}
{{- if $root.Values.kafka.configSecret }}
- {name: kafka-config, mountPath: /etc/runonce/kafka, readOnly: true}
{{- end }}
{{- if $root.Values.kafka.tlsSecret }}
- {name: kafka-tls, mountPath: /etc/runonce/kafka-tls, readOnly: true}
{{- end }}
{{- if $p.passwordSecret }}
- {name: sasl, mountPath: /etc/runonce/sasl, readOnly: true}
{{- end }}
{{- if (include "runonce.reader" . | fromJson).passwordSecret }}
- {name: sasl-reader, mountPath: /etc/runonce/sasl-reader, readOnly: true}
{{- end }}
{{- if and $root.Values.receipts.keySecret (has .who (list "worker" "executors")) }}
- {name: receipts-key, mountPath: /etc/runonce/receipts, readOnly: true}
{{- end }}
{{- if ne .who "topics" }}
- {name: config, mountPath: /etc/runonce/config, readOnly: true}
{{- end }}
{{- end -}}

{{- define "runonce.volumes" -}}
{{- $root := .root -}}
{{- $p := include "runonce.principal" . | fromJson -}}
{{- if $root.Values.kafka.configSecret }}
- name: kafka-config
  secret: {secretName: {{ $root.Values.kafka.configSecret | quote }}}
{{- end }}
{{- if $root.Values.kafka.tlsSecret }}
- name: kafka-tls
  secret: {secretName: {{ $root.Values.kafka.tlsSecret | quote }}}
{{- end }}
{{- if $p.passwordSecret }}
- name: sasl
  secret:
    secretName: {{ $p.passwordSecret | quote }}
    items: [{key: {{ $p.passwordKey | quote }}, path: password}]
{{- end }}
{{- with (include "runonce.reader" . | fromJson) }}
{{- if .passwordSecret }}
- name: sasl-reader
  secret:
    secretName: {{ .passwordSecret | quote }}
    items: [{key: {{ .passwordKey | quote }}, path: password}]
{{- end }}
{{- end }}
{{- if and $root.Values.receipts.keySecret (has .who (list "worker" "executors")) }}
- name: receipts-key
  secret:
    secretName: {{ $root.Values.receipts.keySecret | quote }}
    items: [{key: receipts.pem, path: receipts.pem}]
{{- end }}
{{- if ne .who "topics" }}
- name: config
  configMap: {name: {{ include "runonce.fullname" $root }}-config}
{{- end }}
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

{{/* what every runonce pod's spec shares: (dict "root" $ "component" "worker") */}}
{{- define "runonce.podSpec" -}}
{{- $root := .root -}}
serviceAccountName: {{ include "runonce.serviceAccountName" $root }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
{{- with $root.Values.podSecurityContext }}
securityContext: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $root.Values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range $root.Values.topologySpreadConstraints }}
  - {{- toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" (include "runonce.selector" (dict "root" $root "component" $.component) | fromYaml)))) | nindent 4 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* what every runonce container shares */}}
{{- define "runonce.container" -}}
image: {{ include "runonce.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- with .Values.securityContext }}
securityContext: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.envFrom }}
envFrom: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
