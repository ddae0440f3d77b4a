{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "faucet-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects: fullnameOverride, else the
release name if it already contains the chart name, else release-chart.
Truncated to 63 characters (a DNS label).
*/}}
{{- define "faucet-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "faucet-operator.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "faucet-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "faucet-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: faucet-operator
{{- end }}

{{/*
Labels the manager Deployment selects its pods by. They never change for a
release, because a Deployment's selector is immutable.
*/}}
{{- define "faucet-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "faucet-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Name of the manager's ServiceAccount.
*/}}
{{- define "faucet-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "faucet-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The manager image: repository:tag, or repository@digest when a digest is set.
The tag defaults to the chart's appVersion.
*/}}
{{- define "faucet-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The image of faucet pods whose FaucetServer sets no spec.image: serverImage,
else the manager's own image (it contains the same binary).
*/}}
{{- define "faucet-operator.serverImage" -}}
{{- .Values.serverImage | default (include "faucet-operator.image" .) }}
{{- end }}

{{/*
Name of the leader-election Lease.
*/}}
{{- define "faucet-operator.leaderElectionID" -}}
{{- .Values.leaderElection.id | default (printf "%s.faucet.stxfaucet.dev" (include "faucet-operator.fullname" .)) }}
{{- end }}

{{/*
The watched namespaces, de-duplicated, in the order given. Empty: all.
*/}}
{{- define "faucet-operator.watchNamespaces" -}}
{{- .Values.watchNamespaces | uniq | join "," }}
{{- end }}

{{/*
RBAC rules from a file hack/sync-chart.sh copies from config/rbac:
  files/rbac-rules.yaml            the manager's, which controller-gen derives
                                   from the reconciler's markers (role.yaml)
  files/leader-election-rules.yaml leader election's (leader_election_role.yaml)
Usage: include "faucet-operator.rules" (list . "files/rbac-rules.yaml")
*/}}
{{- define "faucet-operator.rules" -}}
{{- $root := index . 0 }}
{{- $file := index . 1 }}
{{- $rules := $root.Files.Get $file | fromYamlArray }}
{{- if or (not $rules) (not (kindIs "map" (first $rules))) }}
{{- fail (printf "%s is missing or not a list of RBAC rules: run hack/sync-chart.sh" $file) }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/*
Name of the objects about the faucet pods (PodMonitor, PrometheusRule,
dashboard ConfigMap): <fullname>-faucets, within 63 characters.
*/}}
{{- define "faucet-operator.faucetsName" -}}
{{- printf "%s-faucets" (include "faucet-operator.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/*
The labels and annotations of one alert of templates/prometheusrule.yaml:
the severity and alerts.ruleLabels; summary, description, the runbook (from
files/runbooks/<alert>.md, with $labels.faucetserver naming the
faucetMetrics.serverLabel label), runbook_url when alerts.runbookURL is set
(with {alertname} replaced), and alerts.ruleAnnotations.
Usage: include "faucet-operator.alertMeta" (list $ $ruleValues "AlertName" $summary $description)
*/}}
{{- define "faucet-operator.alertMeta" -}}
{{- $root := index . 0 }}
{{- $rule := index . 1 }}
{{- $name := index . 2 }}
{{- $alerts := $root.Values.alerts }}
{{- $file := printf "files/runbooks/%s.md" $name }}
{{- $runbook := $root.Files.Get $file | trim }}
{{- if not $runbook }}
{{- fail (printf "%s is missing: every alert needs a runbook" $file) }}
{{- end }}
{{- $runbook = $runbook | replace "$labels.faucetserver" (printf "$labels.%s" $root.Values.faucetMetrics.serverLabel) }}
{{- $annotations := dict "summary" (index . 3) "description" (index . 4) "runbook" $runbook }}
{{- with $alerts.runbookURL }}
{{- $_ := set $annotations "runbook_url" (replace "{alertname}" $name .) }}
{{- end -}}
labels:
  {{- merge (dict "severity" $rule.severity) ($alerts.ruleLabels | default dict) | toYaml | nindent 2 }}
annotations:
  {{- merge $annotations ($alerts.ruleAnnotations | default dict) | toYaml | nindent 2 }}
{{- end }}

{{/*
Seconds in a Prometheus duration of whole units (y, w, d, h, m, s; "3d",
"1d12h"), which values.schema.json checks: PromQL compares
faucet_runway_seconds with a number.
Usage: include "faucet-operator.durationSeconds" "3d"
*/}}
{{- define "faucet-operator.durationSeconds" -}}
{{- $total := 0 }}
{{- range $unit, $seconds := dict "y" 31536000 "w" 604800 "d" 86400 "h" 3600 "m" 60 "s" 1 }}
{{- with regexFind (printf "[0-9]+%s" $unit) $ }}
{{- $total = add $total (mul (trimSuffix $unit . | int64) $seconds) }}
{{- end }}
{{- end }}
{{- if not $total }}
{{- fail (printf "%q is no positive Prometheus duration of whole units (y, w, d, h, m, s), e.g. 3d" $) }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
Labels of the devnet's objects (devnet.enabled). Not the manager's selector
labels, so no selector of the release (the manager's Deployment, its
PodDisruptionBudget, NetworkPolicy or ServiceMonitor) picks them up.
*/}}
{{- define "faucet-operator.devnetLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "faucet-operator.devnetSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: faucet-operator
{{- end }}

{{/*
Labels the devnet's Deployment and Service select its pod by.
*/}}
{{- define "faucet-operator.devnetSelectorLabels" -}}
app.kubernetes.io/name: faucet-devnet
app.kubernetes.io/instance: {{ .Values.devnet.name }}
{{- end }}
