package charts

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// testLLMKey is a model provider API key set through overrides only.
const testLLMKey = "sk-test-llm-key-0123456789abcdef"

// workspace is where the gateway's system tools act in the pod.
const workspace = "/data/workspace"

// checkAgent holds for every set of values: the agent's settings reach it
// as the env vars `sovereign agent` reads, its replica name is the pod's,
// its API key comes only from a Secret, it keeps no state (no volume but
// /tmp), its Service, PDB and HPA match the values, and its NetworkPolicy
// lets it reach NATS and public HTTPS but not private addresses, the cloud
// metadata endpoint or other ports.
func checkAgent(t *testing.T, m *manifest) {
	name := fullname + "-agent"
	if !boolean(m.values, "agent", "enabled") {
		if has[*appsv1.Deployment](m, name) || has[*networkingv1.NetworkPolicy](m, name) {
			t.Errorf("agent.enabled is false but %s is rendered", name)
		}
		return
	}
	d := find[*appsv1.Deployment](t, m, name)
	c := container(t, d)
	env := m.env(t, c)
	llm := func(k string) string { return fmt.Sprint(at(m.values, "agent", "llm", k)) }
	want := map[string]string{
		"SOVEREIGN_AGENT_NAME":           "field:metadata.name",
		"SOVEREIGN_AGENT_MAX_RUNS":       fmt.Sprint(num(m.values, "agent", "maxRuns")),
		"SOVEREIGN_AGENT_MAX_ITERATIONS": fmt.Sprint(num(m.values, "agent", "maxIterations")),
		"SOVEREIGN_AGENT_TOOL_TIMEOUT":   str(m.values, "agent", "toolTimeout"),
		"SOVEREIGN_LLM_TIMEOUT":          llm("timeout"),
		"SOVEREIGN_LLM_CONTEXT_TOKENS":   fmt.Sprint(num(m.values, "agent", "llm", "contextTokens")),
		"SOVEREIGN_LLM_STREAM":           llm("stream"),
	}
	// Optional settings are left out when empty (the agent's defaults).
	for k, v := range map[string]string{
		"SOVEREIGN_LLM_BASE_URL":      "baseURL",
		"SOVEREIGN_LLM_MODEL":         "model",
		"SOVEREIGN_LLM_SYSTEM_PROMPT": "systemPrompt",
		"SOVEREIGN_LLM_TEMPERATURE":   "temperature",
	} {
		if got, ok := env[k]; llm(v) == "" && ok {
			t.Errorf("agent: %s = %q although agent.llm.%s is empty", k, got, v)
		} else if llm(v) != "" {
			want[k] = llm(v)
		}
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("agent: %s = %q, want %q", k, env[k], v)
		}
	}
	keySet := str(m.values, "secrets", "llmApiKey") != "" || str(m.values, "secrets", "existingSecret") != "" || str(m.values, "agent", "llm", "existingSecret") != ""
	if key, ok := env["SOVEREIGN_LLM_API_KEY"]; ok != keySet || (ok && !strings.HasPrefix(key, "secret:")) {
		t.Errorf("agent: SOVEREIGN_LLM_API_KEY = %q (set %v), want a Secret reference exactly when a key is configured (%v)", key, ok, keySet)
	}
	sealSet := str(m.values, "secrets", "secretKey") != "" || str(m.values, "secrets", "existingSecret") != ""
	if key, ok := env["SOVEREIGN_SECRET_KEY"]; ok != sealSet || (ok && !strings.HasPrefix(key, "secret:")) {
		t.Errorf("agent: SOVEREIGN_SECRET_KEY = %q, want a Secret reference exactly when the secret key is configured (%v)", key, sealSet)
	}
	// Stateless: nothing but /tmp to write to.
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name != "tmp" || v.EmptyDir == nil {
			t.Errorf("agent: volume %s: the agent keeps no state", js(v))
		}
	}
	if s := find[*corev1.Service](t, m, name); len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8094 {
		t.Errorf("agent Service ports = %s, want 8094", js(s.Spec.Ports))
	}
	if boolean(m.values, "agent", "pdb", "enabled") != has[*policyv1.PodDisruptionBudget](m, name) {
		t.Errorf("agent PDB rendered = %v, want %v", has[*policyv1.PodDisruptionBudget](m, name), boolean(m.values, "agent", "pdb", "enabled"))
	}
	if boolean(m.values, "agent", "autoscaling", "enabled") {
		h := find[*autoscalingv2.HorizontalPodAutoscaler](t, m, name)
		runs := false
		for _, mt := range h.Spec.Metrics {
			if mt.Type == autoscalingv2.PodsMetricSourceType && mt.Pods.Metric.Name == "sovereign_agent_runs_active" {
				want := resource.NewMilliQuantity(int64(num(m.values, "agent", "maxRuns")*num(m.values, "agent", "autoscaling", "runs", "targetPercentOfCapacity")*10), resource.DecimalSI)
				runs = mt.Pods.Target.Type == autoscalingv2.AverageValueMetricType && mt.Pods.Target.AverageValue.Cmp(*want) == 0
				if !runs {
					t.Errorf("agent HPA runs target = %s, want average %v", js(mt.Pods.Target), want)
				}
			}
		}
		if runs != boolean(m.values, "agent", "autoscaling", "runs", "enabled") {
			t.Errorf("agent HPA runs metric present = %v: %s", runs, js(h.Spec.Metrics))
		}
	} else {
		if has[*autoscalingv2.HorizontalPodAutoscaler](m, name) {
			t.Error("agent HPA rendered with agent.autoscaling.enabled false")
		}
		if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != num(m.values, "agent", "replicas") {
			t.Errorf("agent replicas = %v, want %d", d.Spec.Replicas, num(m.values, "agent", "replicas"))
		}
	}

	if !boolean(m.values, "networkPolicy", "enabled") {
		return
	}
	np := find[*networkingv1.NetworkPolicy](t, m, name)
	for _, tc := range []struct {
		ip    string
		port  int32
		allow bool
		what  string
	}{
		{"203.0.113.10", 443, true, "a hosted provider (public HTTPS)"},
		{"2001:db8::10", 443, true, "a hosted provider over IPv6"},
		{"203.0.113.10", 80, false, "plain HTTP to the internet"},
		{"203.0.113.10", 22, false, "another port"},
		{"10.1.2.3", 443, false, "a private address"},
		{"192.168.1.10", 443, false, "a private address"},
		{"169.254.169.254", 443, false, "the cloud metadata endpoint"},
		{"169.254.169.254", 80, false, "the cloud metadata endpoint"},
		{"fd00::1", 443, false, "a private IPv6 address"},
	} {
		if got := egressAllowsIP(np, tc.ip, tc.port); got != tc.allow {
			t.Errorf("agent egress to %s:%d (%s) = %v, want %v", tc.ip, tc.port, tc.what, got, tc.allow)
		}
	}
	for _, p := range at(m.values, "networkPolicy", "agent", "providers").([]any) {
		p := p.(map[string]any)
		prefix := netip.MustParsePrefix(p["cidr"].(string))
		for _, port := range p["ports"].([]any) {
			port := int32(num(map[string]any{"p": port}, "p"))
			if !egressAllowsIP(np, prefix.Addr().String(), port) {
				t.Errorf("agent egress does not reach the self-hosted provider %s:%d", prefix.Addr(), port)
			}
			if next := prefix.Addr().Next(); prefix.Bits() == 32 && egressAllowsIP(np, next.String(), port) {
				t.Errorf("agent egress reaches %s:%d, beyond the provider %s", next, port, prefix)
			}
		}
	}
}

// checkSystemTools holds for every set of values: the gateway gets
// SOVEREIGN_SYSTEM_TOOLS; with the tools on, SOVEREIGN_WORKSPACE is a
// writable volume, shared (ReadWriteMany) when there is more than one
// gateway; with them off, there is no workspace.
func checkSystemTools(t *testing.T, m *manifest) {
	d := find[*appsv1.Deployment](t, m, fullname+"-gateway")
	c := container(t, d)
	env := m.env(t, c)
	mode := fmt.Sprint(at(m.values, "gateway", "systemTools", "mode"))
	switch mode {
	case "true":
		mode = "on"
	case "false":
		mode = "off"
	}
	if env["SOVEREIGN_SYSTEM_TOOLS"] != mode {
		t.Errorf("gateway SOVEREIGN_SYSTEM_TOOLS = %q, want %q", env["SOVEREIGN_SYSTEM_TOOLS"], mode)
	}
	i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == workspace })
	if mode == "off" {
		if _, ok := env["SOVEREIGN_WORKSPACE"]; ok || i >= 0 || has[*corev1.PersistentVolumeClaim](m, fullname+"-gateway-workspace") {
			t.Errorf("system tools off, yet a workspace: env %q, mount %d, claims %v", env["SOVEREIGN_WORKSPACE"], i, m.names())
		}
		return
	}
	if env["SOVEREIGN_WORKSPACE"] != workspace || i < 0 || c.VolumeMounts[i].ReadOnly {
		t.Fatalf("gateway SOVEREIGN_WORKSPACE = %q, mounts %s: want a writable volume at %s", env["SOVEREIGN_WORKSPACE"], js(c.VolumeMounts), workspace)
	}
	vols := d.Spec.Template.Spec.Volumes
	v := vols[slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })]
	if d.Spec.Replicas == nil || *d.Spec.Replicas > 1 {
		if v.PersistentVolumeClaim == nil {
			t.Fatalf("%v gateways, each with its own workspace %s", d.Spec.Replicas, js(v))
		}
		pvc := find[*corev1.PersistentVolumeClaim](t, m, v.PersistentVolumeClaim.ClaimName)
		if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
			t.Errorf("%d gateways share a workspace claim of modes %v, want ReadWriteMany", *d.Spec.Replicas, pvc.Spec.AccessModes)
		}
	}
}

// checkAgentProvider: a hosted provider's settings reach the agent, its API
// key from the chart's Secret, and the self-hosted provider is allowed.
func checkAgentProvider(t *testing.T, m *manifest) {
	env := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-agent")))
	for k, v := range map[string]string{
		"SOVEREIGN_LLM_BASE_URL":       "https://openrouter.ai/api/v1",
		"SOVEREIGN_LLM_MODEL":          "openai/gpt-4.1-mini",
		"SOVEREIGN_LLM_SYSTEM_PROMPT":  "You drive a browser.\nBe brief.",
		"SOVEREIGN_LLM_TEMPERATURE":    "0.2",
		"SOVEREIGN_LLM_CONTEXT_TOKENS": "128000",
		"SOVEREIGN_LLM_STREAM":         "false",
		"SOVEREIGN_LLM_API_KEY":        "secret:" + fullname + "/llm-api-key",
		"SOVEREIGN_SECRET_KEY":         "secret:" + fullname + "/secret-key",
	} {
		if env[k] != v {
			t.Errorf("agent %s = %q, want %q", k, env[k], v)
		}
	}
	if s := find[*corev1.Secret](t, m, fullname); string(s.Data["llm-api-key"]) != testLLMKey {
		t.Errorf("Secret llm-api-key = %q", s.Data["llm-api-key"])
	}
	if !strings.Contains(m.notes, "Its model: openai/gpt-4.1-mini at https://openrouter.ai/api/v1") || strings.Contains(m.notes, "WARNING: agent.llm.baseURL") {
		t.Errorf("NOTES on the agent:\n%s", m.notes)
	}
	if d := find[*appsv1.Deployment](t, m, fullname+"-agent"); d.Spec.Replicas != nil {
		t.Errorf("autoscaled agent sets replicas %d", *d.Spec.Replicas)
	}
}

// checkAgentExistingSecret: the API key from agent.llm.existingSecret, and
// the NOTES warn that the NetworkPolicy blocks the provider's port.
func checkAgentExistingSecret(t *testing.T, m *manifest) {
	c := container(t, find[*appsv1.Deployment](t, m, fullname+"-agent"))
	env := m.env(t, c)
	if env["SOVEREIGN_LLM_API_KEY"] != "secret:openai/token" || env["SOVEREIGN_LLM_TEMPERATURE"] != "0" {
		t.Errorf("agent API key %q, temperature %q; want secret:openai/token, 0", env["SOVEREIGN_LLM_API_KEY"], env["SOVEREIGN_LLM_TEMPERATURE"])
	}
	if n := len(all[*corev1.Secret](m)); n != 0 {
		t.Errorf("%d Secrets rendered; the key lives in the Secret openai", n)
	}
	if !strings.Contains(m.notes, "WARNING: agent.llm.baseURL uses port 11434") {
		t.Errorf("NOTES do not warn that port 11434 is blocked:\n%s", m.notes)
	}
	np := find[*networkingv1.NetworkPolicy](t, m, fullname+"-agent")
	if egressAllowsIP(np, "10.0.5.20", 11434) {
		t.Error("agent egress reaches a private address on 11434 without networkPolicy.agent.providers")
	}
}

func checkSystemToolsShared(t *testing.T, m *manifest) {
	pvc := find[*corev1.PersistentVolumeClaim](t, m, fullname+"-gateway-workspace")
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "nfs" || pvc.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("workspace claim %s", js(pvc))
	}
	if d := find[*appsv1.Deployment](t, m, fullname+"-gateway"); *d.Spec.Replicas != 2 {
		t.Errorf("gateway replicas = %d", *d.Spec.Replicas)
	}
	if !strings.Contains(m.notes, "for MCP clients as well as agent runs") {
		t.Errorf("NOTES do not say the system tools are on for MCP clients:\n%s", m.notes)
	}
}

func checkSystemToolsAgent(t *testing.T, m *manifest) {
	d := find[*appsv1.Deployment](t, m, fullname+"-gateway")
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "workspace" })
	if i < 0 || d.Spec.Template.Spec.Volumes[i].EmptyDir == nil || d.Spec.Template.Spec.Volumes[i].EmptyDir.SizeLimit.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("one gateway's workspace: %s, want a 1Gi emptyDir", js(d.Spec.Template.Spec.Volumes))
	}
	if !strings.Contains(m.notes, "for agent runs only") {
		t.Errorf("NOTES do not say the system tools are for agent runs only:\n%s", m.notes)
	}
}

// egressAllowsPod reports whether a NetworkPolicy's egress rules let its
// pods reach pods with these labels in the release's namespace on a TCP
// port.
func egressAllowsPod(np *networkingv1.NetworkPolicy, podLabels map[string]string, port int32) bool {
	nsLabels := labels.Set{"kubernetes.io/metadata.name": namespace}
	for _, r := range np.Spec.Egress {
		if !portMatches(r.Ports, port) {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, p := range r.To {
			if p.IPBlock != nil {
				continue
			}
			if p.NamespaceSelector != nil {
				sel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
				if err != nil || !sel.Matches(nsLabels) {
					continue
				}
			}
			sel := labels.Everything()
			if p.PodSelector != nil {
				var err error
				if sel, err = metav1.LabelSelectorAsSelector(p.PodSelector); err != nil {
					continue
				}
			}
			if sel.Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// egressAllowsIP reports whether a NetworkPolicy's egress rules let its
// pods reach an address outside the cluster on a TCP port.
func egressAllowsIP(np *networkingv1.NetworkPolicy, ip string, port int32) bool {
	addr := netip.MustParseAddr(ip)
	for _, r := range np.Spec.Egress {
		if !portMatches(r.Ports, port) {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, p := range r.To {
			if p.IPBlock == nil || !netip.MustParsePrefix(p.IPBlock.CIDR).Contains(addr) {
				continue
			}
			if !slices.ContainsFunc(p.IPBlock.Except, func(e string) bool { return netip.MustParsePrefix(e).Contains(addr) }) {
				return true
			}
		}
	}
	return false
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort:
			return true
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}
