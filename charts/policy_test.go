package charts

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/signer"
)

// TestPolicyFiles loads the policy files the chart renders from values with
// the services' own strict loaders, as the pods would at start.
func TestPolicyFiles(t *testing.T) {
	m := mustRender(t, readValues(t, valuesFile("ingress-oauth-values.yaml"), nil))
	cm := find[*corev1.ConfigMap](t, m, fullname+"-policy")
	dir := t.TempDir()
	write := func(key string) string {
		t.Helper()
		data, ok := cm.Data[key]
		if !ok {
			t.Fatalf("ConfigMap %s has no %s", cm.Name, key)
		}
		path := filepath.Join(dir, key)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	gp, err := gateway.LoadPolicyFile(write("gateway-policy.yaml"))
	if err != nil {
		t.Fatalf("the gateway refuses its rendered policy: %v", err)
	}
	if len(gp.URLs.Allow) != 2 || gp.URLs.BlockPrivate == nil || !*gp.URLs.BlockPrivate || len(gp.Approvals.Tools) != 1 {
		t.Errorf("gateway policy = %+v, want the values' allow list, block_private and one approval", gp)
	}

	sp, err := signer.LoadPolicy(write("signer-policy.yaml"))
	if err != nil {
		t.Fatalf("the signer refuses its rendered policy: %v", err)
	}
	// The two rules from the values, before the built-in defaults.
	lines := sp.Lines()
	if len(lines) < 2 || lines[0] != "allow sign kinds 1,7 from https://snort.social" {
		t.Errorf("signer policy lines = %q", lines)
	}
}
