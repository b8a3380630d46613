{{/*
Names, labels, images and the pieces every Sovereign pod shares.
*/}}

{{- define "sovereign.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name prefix of every resource: <release>-<chart>, or <release>
when it already contains the chart name. Kept short enough for the longest
suffix ("-history-data", and "-nats-headless" plus a pod ordinal).
*/}}
{{- define "sovereign.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sovereign.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object of the release carries. */}}
{{- define "sovereign.labels" -}}
helm.sh/chart: {{ include "sovereign.chart" . }}
app.kubernetes.io/name: {{ include "sovereign.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sovereign
{{- end }}

{{/* Selects every pod of the release (NATS allows exactly these). */}}
{{- define "sovereign.releaseSelector" -}}
app.kubernetes.io/name: {{ include "sovereign.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one component: (dict "ctx" $ "component" "gateway"). */}}
{{- define "sovereign.componentLabels" -}}
{{ include "sovereign.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "gateway"). */}}
{{- define "sovereign.selectorLabels" -}}
{{ include "sovereign.releaseSelector" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "sovereign.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sovereign.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image of a Sovereign service: (dict "ctx" $ "component" "gateway"). */}}
{{- define "sovereign.image" -}}
{{- $v := .ctx.Values -}}
{{- $svc := index $v .component -}}
{{- $repo := printf "%s/%s-%s" $v.image.registry $v.image.repositoryPrefix .component -}}
{{- if $svc.image.repository }}{{ $repo = $svc.image.repository }}{{ end -}}
{{- $tag := $svc.image.tag | default $v.image.tag | default .ctx.Chart.AppVersion -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end }}

{{/* The NATS URL every service connects to. */}}
{{- define "sovereign.natsURL" -}}
{{- if .Values.nats.cluster.enabled -}}
nats://{{ include "sovereign.fullname" . }}-nats:4222
{{- else -}}
{{- .Values.nats.external.url -}}
{{- end }}
{{- end }}

{{/* The ports of the external NATS URLs, one per line (default 4222). */}}
{{- define "sovereign.externalNatsPorts" -}}
{{- $ports := list -}}
{{- range splitList "," .Values.nats.external.url -}}
{{- $u := trim . -}}
{{- if $u -}}
{{- $host := (urlParse $u).host -}}
{{- $port := "4222" -}}
{{- if regexMatch ":[0-9]+$" $host }}{{ $port = regexFind "[0-9]+$" $host }}{{ end -}}
{{- $ports = append $ports $port -}}
{{- end -}}
{{- end -}}
{{- join "\n" (uniq $ports) -}}
{{- end }}

{{/* The port of the OTLP endpoint (4317 by default for grpc, 4318 for http). */}}
{{- define "sovereign.otlpPort" -}}
{{- $host := (urlParse .Values.telemetry.otlpEndpoint).host -}}
{{- if regexMatch ":[0-9]+$" $host -}}
{{- regexFind "[0-9]+$" $host -}}
{{- else if hasPrefix "http/" .Values.telemetry.otlpProtocol -}}
4318
{{- else -}}
4317
{{- end -}}
{{- end }}

{{/* The Secret holding the secret values (the chart's or an existing one). */}}
{{- define "sovereign.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "sovereign.fullname" .) }}
{{- end }}

{{/*
An env var from the Secret, rendered only when the key can exist there:
(dict "ctx" $ "env" "SOVEREIGN_ADMIN_TOKEN" "key" "adminToken" "required" false).
With an existingSecret every key may be absent (optional) unless required.
*/}}
{{- define "sovereign.secretEnv" -}}
{{- $s := .ctx.Values.secrets -}}
{{- if or $s.existingSecret (index $s .key) -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sovereign.secretName" .ctx }}
      key: {{ index $s.keys .key }}
      {{- if and $s.existingSecret (not .required) }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}

{{/*
gateway.systemTools.mode as SOVEREIGN_SYSTEM_TOOLS: off, agent or on. An
unquoted off or on in a values file is a YAML boolean: false is off, true on.
*/}}
{{- define "sovereign.systemToolsMode" -}}
{{- $m := .Values.gateway.systemTools.mode -}}
{{- if kindIs "bool" $m -}}
{{- ternary "on" "off" $m -}}
{{- else -}}
{{- $m -}}
{{- end -}}
{{- end }}

{{/* The gateway's public URL, without /mcp ("" when unknown). */}}
{{- define "sovereign.gatewayPublicURL" -}}
{{- $g := .Values.gateway -}}
{{- if $g.publicURL -}}
{{- trimSuffix "/" $g.publicURL -}}
{{- else if and $g.ingress.enabled $g.ingress.host -}}
{{- printf "%s://%s" (ternary "https" "http" $g.ingress.tls.enabled) $g.ingress.host -}}
{{- end -}}
{{- end }}

{{/* Host headers the gateway accepts besides the loopback names. */}}
{{- define "sovereign.gatewayAllowedHosts" -}}
{{- $svc := printf "%s-gateway" (include "sovereign.fullname" .) -}}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.%s" $svc .Release.Namespace .Values.clusterDomain) -}}
{{- if and .Values.gateway.ingress.enabled .Values.gateway.ingress.host -}}
{{- $hosts = prepend $hosts .Values.gateway.ingress.host -}}
{{- end -}}
{{- with include "sovereign.gatewayPublicURL" . -}}
{{- $hosts = append $hosts (urlParse .).hostname -}}
{{- end -}}
{{- $hosts = concat $hosts .Values.gateway.allowedHosts -}}
{{- join "," (uniq (compact $hosts)) -}}
{{- end }}

{{/* Environment every Sovereign service shares. */}}
{{- define "sovereign.commonEnv" -}}
- name: NATS_URL
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" . }}-env
      key: NATS_URL
- name: SOVEREIGN_NATS_REPLICAS
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" . }}-env
      key: SOVEREIGN_NATS_REPLICAS
- name: SOVEREIGN_LOG_FORMAT
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" . }}-env
      key: SOVEREIGN_LOG_FORMAT
- name: SOVEREIGN_LOG_LEVEL
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" . }}-env
      key: SOVEREIGN_LOG_LEVEL
{{- with .Values.telemetry }}
{{- if .otlpEndpoint }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" $ }}-env
      key: OTEL_EXPORTER_OTLP_ENDPOINT
{{- if .otlpProtocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  valueFrom:
    configMapKeyRef:
      name: {{ include "sovereign.fullname" $ }}-env
      key: OTEL_EXPORTER_OTLP_PROTOCOL
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE)%s" (ternary (printf ",%s" .resourceAttributes) "" (ne .resourceAttributes "")) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Pod annotations: scrape hints, and a checksum of the ConfigMaps' inputs so
pods roll when settings change. There is deliberately no checksum of the
secrets (a hash of a weak passphrase in a Deployment invites offline
guessing): after changing them, `kubectl rollout restart` the Deployments.
(dict "ctx" $ "svc" .Values.gateway "port" 8080)
*/}}
{{- define "sovereign.podAnnotations" -}}
{{- $v := .ctx.Values }}
checksum/config: {{ list (include "sovereign.natsURL" .ctx) $v.log $v.telemetry $v.gateway.policy $v.signer.policy | toJson | sha256sum }}
{{- if .ctx.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .svc.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Readiness (/readyz) and liveness (/healthz) probes on the named port. */}}
{{- define "sovereign.probes" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ . }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ . }}
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
{{- end }}

{{/* Pod-level settings every pod shares: (dict "ctx" $ "svc" .Values.gateway). */}}
{{- define "sovereign.podSpecCommon" -}}
serviceAccountName: {{ include "sovereign.serviceAccountName" .ctx }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- mergeOverwrite (deepCopy .ctx.Values.podSecurityContext) (.svc.podSecurityContext | default dict) | toYaml | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Checks across values that the schema cannot express well. */}}
{{- define "sovereign.validate" -}}
{{- $v := .Values -}}
{{- if and $v.nats.cluster.enabled $v.nats.external.url -}}
{{- fail "nats: set either nats.cluster.enabled (in-chart NATS) or nats.external.url, not both" -}}
{{- end -}}
{{- if and (not $v.nats.cluster.enabled) (not $v.nats.external.url) -}}
{{- fail "nats: set nats.external.url (nats://host:4222) or turn nats.cluster.enabled on" -}}
{{- end -}}
{{- if $v.secrets.existingSecret -}}
{{- if or $v.secrets.adminToken $v.secrets.secretKey $v.secrets.signerPassphrase $v.secrets.historyDSN $v.secrets.llmApiKey -}}
{{- fail "secrets: with secrets.existingSecret, leave adminToken, secretKey, signerPassphrase, historyDSN and llmApiKey empty (they belong in that Secret)" -}}
{{- end -}}
{{- end -}}
{{- if and $v.agent.llm.existingSecret $v.secrets.llmApiKey -}}
{{- fail "agent: set the API key either in secrets.llmApiKey or in the Secret agent.llm.existingSecret, not both" -}}
{{- end -}}
{{- with $v.gateway.systemTools -}}
{{- if and (ne (include "sovereign.systemToolsMode" $) "off") (gt (int $v.gateway.replicas) 1) (not (and .workspace.persistence.enabled (or .workspace.persistence.existingClaim (eq .workspace.persistence.accessMode "ReadWriteMany")))) -}}
{{- fail (printf "gateway.systemTools: with %d gateway replicas each pod would have its own workspace, and an agent's calls go to any gateway. Use gateway.replicas=1, or one shared volume: gateway.systemTools.workspace.persistence.enabled=true with accessMode ReadWriteMany (or an existingClaim of that mode)" (int $v.gateway.replicas)) -}}
{{- end -}}
{{- end -}}
{{- if and $v.history.enabled (eq $v.history.database.type "sqlite") (gt (int $v.history.replicas) 1) -}}
{{- fail "history: SQLite allows one replica; use history.database.type=postgres for more" -}}
{{- end -}}
{{- if and $v.history.enabled (eq $v.history.database.type "postgres") (not $v.secrets.existingSecret) (not $v.secrets.historyDSN) -}}
{{- fail "history: PostgreSQL needs secrets.historyDSN (or secrets.existingSecret with the history-dsn key)" -}}
{{- end -}}
{{- $seccomp := dig "seccompProfile" "type" (dig "seccompProfile" "type" "" $v.containerSecurityContext) $v.browser.securityContext -}}
{{- if and (ne $v.browser.chromeSandbox "off") (ne $seccomp "Localhost") -}}
{{- fail (printf "browser.chromeSandbox %q needs unprivileged user namespaces, which the %s seccomp profile forbids: Chromium would not start. Set browser.chromeSandbox=off, or install deploy/chromium-seccomp.json on the nodes and set browser.securityContext.seccompProfile to {type: Localhost, localhostProfile: sovereign/chromium-seccomp.json}" $v.browser.chromeSandbox $seccomp) -}}
{{- end -}}
{{- if and $v.gateway.ingress.enabled (not $v.gateway.ingress.host) -}}
{{- fail "gateway.ingress.host is required when gateway.ingress.enabled is true" -}}
{{- end -}}
{{- if and $v.gateway.oauth.issuer (not (include "sovereign.gatewayPublicURL" .)) -}}
{{- fail "gateway.oauth.issuer needs a public URL: set gateway.publicURL or enable the ingress with a host" -}}
{{- end -}}
{{- range $component, $perPod := dict "browser" "sessions" "agent" "runs" -}}
{{- with (index $v $component).autoscaling -}}
{{- if and .enabled (not .cpu.enabled) (not (index . $perPod).enabled) -}}
{{- fail (printf "%s.autoscaling: turn on the cpu or the %s metric (or autoscaling off)" $component $perPod) -}}
{{- end -}}
{{- if and .enabled (gt (int .minReplicas) (int .maxReplicas)) -}}
{{- fail (printf "%s.autoscaling: minReplicas is above maxReplicas" $component) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $v.secrets.adminToken (lt (len $v.secrets.adminToken) 16) -}}
{{- fail "secrets.adminToken must have at least 16 characters" -}}
{{- end -}}
{{- if and $v.secrets.signerPassphrase (lt (len $v.secrets.signerPassphrase) 8) -}}
{{- fail "secrets.signerPassphrase must have at least 8 characters" -}}
{{- end -}}
{{- end }}

{{/*
The egress every restricted pod (signer, agent) needs: NATS (the in-chart
pods, or the external URL's ports to natsTo), DNS, and the OTLP endpoint's
port when tracing is on. (dict "ctx" $ "natsTo" <NetworkPolicyPeer list>)
*/}}
{{- define "sovereign.baseEgress" -}}
{{- $np := .ctx.Values.networkPolicy -}}
# NATS.
{{- if .ctx.Values.nats.cluster.enabled }}
- ports:
    - protocol: TCP
      port: 4222
  to:
    - podSelector:
        matchLabels:
          {{- include "sovereign.selectorLabels" (dict "ctx" .ctx "component" "nats") | nindent 10 }}
{{- else }}
- ports:
    {{- range splitList "\n" (include "sovereign.externalNatsPorts" .ctx) }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  {{- with .natsTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
# DNS.
- ports:
    - protocol: UDP
      port: {{ $np.dns.port }}
    - protocol: TCP
      port: {{ $np.dns.port }}
  {{- with $np.dns.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- if .ctx.Values.telemetry.otlpEndpoint }}
# Traces to the OTLP endpoint.
- ports:
    - protocol: TCP
      port: {{ include "sovereign.otlpPort" .ctx }}
{{- end }}
{{- end }}

{{/*
A HorizontalPodAutoscaler on CPU and on a per-pod gauge of work in progress
against the pod's capacity: (dict "ctx" $ "component" "browser" "name"
$name "autoscaling" .Values.browser.autoscaling "perPod" "sessions"
"capacity" .Values.browser.maxSessions). The per-pod metric is a Pods metric
served by a custom metrics adapter (e.g. prometheus-adapter) from the
pods' /metrics: see the chart README.
*/}}
{{- define "sovereign.hpa" -}}
{{- $ctx := dict "ctx" .ctx "component" .component -}}
{{- $perPod := index .autoscaling .perPod -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .name }}
  labels:
    {{- include "sovereign.componentLabels" $ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ .name }}
  minReplicas: {{ .autoscaling.minReplicas }}
  maxReplicas: {{ .autoscaling.maxReplicas }}
  metrics:
    {{- if .autoscaling.cpu.enabled }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ .autoscaling.cpu.averageUtilization }}
    {{- end }}
    {{- if $perPod.enabled }}
    - type: Pods
      pods:
        metric:
          name: {{ $perPod.metricName }}
        target:
          type: AverageValue
          # {{ $perPod.targetPercentOfCapacity }}% of {{ .capacity }} {{ .perPod }} per pod.
          averageValue: {{ printf "%dm" (mul .capacity $perPod.targetPercentOfCapacity 10) | quote }}
    {{- end }}
  {{- with .autoscaling.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* A container's security context: the chart-wide one with the service's overrides. (dict "ctx" $ "svc" .Values.browser) */}}
{{- define "sovereign.containerSecurityContext" -}}
{{- mergeOverwrite (deepCopy .ctx.Values.containerSecurityContext) (.svc.securityContext | default dict) | toYaml }}
{{- end }}
