package charts

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestBadValuesFile: values files with values of the wrong type or range
// fail `helm install`'s validation and `helm lint`, naming each value.
func TestBadValuesFile(t *testing.T) {
	for file, wants := range map[string][]string{
		// A string where the schema wants an integer.
		"bad-replicas-values.yaml": {"/browser/replicas", "want integer"},
		// No agent replica, and a port number for the provider's URL.
		"bad-agent-values.yaml": {"/agent/replicas", "minimum: got 0, want 1", "/agent/llm/baseURL", "want string"},
	} {
		t.Run(file, func(t *testing.T) {
			vals := readValues(t, filepath.Join("testdata", file), nil)
			_, err := render(loadChart(t), vals)
			if err == nil {
				t.Fatalf("render accepted %v", vals)
			}
			for _, want := range wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("render error = %q, want it to contain %q", err, want)
				}
			}
			linter := lint.AllWithKubeVersionAndSchemaValidation(chartDir, vals, namespace, kubeVersion, false)
			if linter.HighestSeverity != support.ErrorSev {
				t.Fatalf("helm lint: highest severity %d, want ERROR; messages %v", linter.HighestSeverity, linter.Messages)
			}
			found := false
			for _, msg := range linter.Messages {
				found = found || (msg.Severity == support.ErrorSev && strings.Contains(msg.Err.Error(), wants[0]))
			}
			if !found {
				t.Errorf("helm lint does not name %s: %v", wants[0], linter.Messages)
			}
		})
	}
}

// TestValuesRejected: values the schema or the chart's checks refuse, each
// with an error that names the problem.
func TestValuesRejected(t *testing.T) {
	type m = map[string]any
	tests := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"sqlite-history-replicas", m{"history": m{"replicas": 2}}, "/history/replicas"},
		{"both-nats", m{"nats": m{"external": m{"url": "nats://nats:4222"}}}, "/nats"},
		{"no-nats", m{"nats": m{"cluster": m{"enabled": false}}}, "/nats"},
		{"nats-replicas-2", m{"nats": m{"cluster": m{"replicas": 2}}}, "/nats/cluster/replicas"},
		{"bad-nats-url", m{"nats": m{"cluster": m{"enabled": false}, "external": m{"url": "http://nats:4222"}}}, "/nats/external/url"},
		{"unknown-key", m{"gateway": m{"replica": 3}}, "additional properties 'replica'"},
		{"log-level", m{"log": m{"level": "verbose"}}, "/log/level"},
		{"history-database", m{"history": m{"database": m{"type": "mysql"}}}, "/history/database/type"},
		{"gateway-policy-typo", m{"gateway": m{"policy": m{"urls": m{"alow": []any{"x"}}}}}, "additional properties 'alow'"},
		{"signer-policy-action", m{"signer": m{"policy": m{"rules": []any{m{"origin": "*", "action": "maybe"}}}}}, "/signer/policy/rules/0/action"},
		{"hpa-cpu-percent", m{"browser": m{"autoscaling": m{"cpu": m{"averageUtilization": 150}}}}, "/browser/autoscaling/cpu/averageUtilization"},
		{"resources-quantity", m{"browser": m{"resources": m{"limits": m{"memory": "lots"}}}}, "/browser/resources/limits/memory"},
		{"existing-secret-and-value", m{"secrets": m{"existingSecret": "s", "adminToken": "0123456789abcdef0"}}, "leave adminToken"},
		{"postgres-without-dsn", m{"history": m{"database": m{"type": "postgres"}}}, "needs secrets.historyDSN"},
		{"dsn-not-postgres", m{"secrets": m{"historyDSN": "mysql://x"}}, "/secrets/historyDSN"},
		{"ingress-without-host", m{"gateway": m{"ingress": m{"enabled": true}}}, "gateway.ingress.host is required"},
		{"oauth-without-public-url", m{"gateway": m{"oauth": m{"issuer": "https://auth.example.com"}}}, "needs a public URL"},
		{"short-admin-token", m{"secrets": m{"adminToken": "short"}}, "at least 16 characters"},
		{"hpa-without-metrics", m{"browser": m{"autoscaling": m{"cpu": m{"enabled": false}, "sessions": m{"enabled": false}}}}, "turn on the cpu or the sessions metric"},
		{"sandbox-without-seccomp-profile", m{"browser": m{"chromeSandbox": "auto"}}, "Chromium would not start"},
		{"sandbox-value", m{"browser": m{"chromeSandbox": "yes"}}, "/browser/chromeSandbox"},
		{"hpa-bounds", m{"browser": m{"autoscaling": m{"minReplicas": 5, "maxReplicas": 2}}}, "minReplicas is above maxReplicas"},
		{"agent-replicas-0", m{"agent": m{"replicas": 0}}, "/agent/replicas"},
		{"agent-base-url-type", m{"agent": m{"llm": m{"baseURL": 11434}}}, "/agent/llm/baseURL"},
		{"agent-base-url-scheme", m{"agent": m{"llm": m{"baseURL": "ollama:11434"}}}, "/agent/llm/baseURL"},
		{"agent-base-url-credentials", m{"agent": m{"llm": m{"baseURL": "https://user:sk-x@llm.example.com/v1"}}}, "/agent/llm/baseURL"},
		{"agent-temperature-high", m{"agent": m{"llm": m{"temperature": 2.5}}}, "/agent/llm/temperature"},
		{"agent-temperature-word", m{"agent": m{"llm": m{"temperature": "warm"}}}, "/agent/llm/temperature"},
		{"agent-max-iterations", m{"agent": m{"maxIterations": 0}}, "/agent/maxIterations"},
		{"agent-max-runs", m{"agent": m{"maxRuns": "eight"}}, "/agent/maxRuns"},
		{"agent-llm-timeout", m{"agent": m{"llm": m{"timeout": "2 minutes"}}}, "/agent/llm/timeout"},
		{"agent-unknown-key", m{"agent": m{"llm": m{"apiKey": "sk-x"}}}, "additional properties 'apiKey'"},
		{"agent-two-keys", m{"secrets": m{"llmApiKey": "sk-x"}, "agent": m{"llm": m{"existingSecret": "openai"}}}, "not both"},
		{"existing-secret-and-llm-key", m{"secrets": m{"existingSecret": "s", "llmApiKey": "sk-x"}}, "llmApiKey empty"},
		{"agent-hpa-without-metrics", m{"agent": m{"autoscaling": m{"enabled": true, "cpu": m{"enabled": false}, "runs": m{"enabled": false}}}}, "agent.autoscaling: turn on the cpu or the runs metric"},
		{"agent-hpa-bounds", m{"agent": m{"autoscaling": m{"enabled": true, "minReplicas": 5, "maxReplicas": 2}}}, "agent.autoscaling: minReplicas is above maxReplicas"},
		{"agent-provider-cidr", m{"networkPolicy": m{"agent": m{"providers": []any{m{"cidr": "10.0.5.20", "ports": []any{11434}}}}}}, "/networkPolicy/agent/providers/0/cidr"},
		{"agent-provider-no-ports", m{"networkPolicy": m{"agent": m{"providers": []any{m{"cidr": "10.0.5.20/32", "ports": []any{}}}}}}, "/networkPolicy/agent/providers/0/ports"},
		{"system-tools-mode", m{"gateway": m{"systemTools": m{"mode": "yes"}}}, "/gateway/systemTools/mode"},
		{"system-tools-two-gateways", m{"gateway": m{"systemTools": m{"mode": "agent"}}}, "each pod would have its own workspace"},
		{"system-tools-rwo-claim", m{"gateway": m{"systemTools": m{"mode": "on", "workspace": m{"persistence": m{"enabled": true, "accessMode": "ReadWriteOnce"}}}}}, "each pod would have its own workspace"},
	}
	c := loadChart(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(c, tt.vals)
			if err == nil {
				t.Fatalf("render accepted %v", tt.vals)
			}
			t.Logf("%v", err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}
