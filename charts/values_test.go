package charts

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestBadValuesFile: a values file with a string where the schema wants an
// integer fails `helm install`'s validation and `helm lint`, naming the
// value.
func TestBadValuesFile(t *testing.T) {
	vals := readValues(t, filepath.Join("testdata", "bad-replicas-values.yaml"), nil)
	_, err := render(loadChart(t), vals)
	if err == nil {
		t.Fatal("render accepted browser.replicas: three")
	}
	for _, want := range []string{"/browser/replicas", "want integer"} {
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
		found = found || (msg.Severity == support.ErrorSev && strings.Contains(msg.Err.Error(), "/browser/replicas"))
	}
	if !found {
		t.Errorf("helm lint does not name /browser/replicas: %v", linter.Messages)
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
