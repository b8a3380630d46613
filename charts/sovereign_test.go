package charts

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
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
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Test-only secret values: set through overrides, never in a values file.
var testSecrets = map[string]any{
	"adminToken":       "admin-token-for-tests-0123456789",
	"secretKey":        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
	"signerPassphrase": "signer-passphrase-for-tests",
}

// The health port of each Sovereign service and the env var that sets its
// listen address (docs/operations.md).
var services = map[string]struct {
	port      int32
	listenEnv string
}{
	"gateway": {8080, "SOVEREIGN_LISTEN"},
	"browser": {8091, "SOVEREIGN_BROWSER_LISTEN"},
	"history": {8092, "SOVEREIGN_HISTORY_LISTEN"},
	"signer":  {8093, "SOVEREIGN_SIGNER_LISTEN"},
	"agent":   {8094, "SOVEREIGN_AGENT_LISTEN"},
}

func TestRender(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		overrides map[string]any
		check     func(t *testing.T, m *manifest)
	}{
		{name: "default", check: checkDefault},
		{name: "external-nats-postgres", file: valuesFile("external-nats-postgres-values.yaml"), check: checkExternal},
		{name: "nats-cluster", file: valuesFile("nats-cluster-values.yaml"),
			overrides: map[string]any{"secrets": testSecrets}, check: checkNATSCluster},
		{name: "ingress-oauth", file: valuesFile("ingress-oauth-values.yaml"), check: checkIngressOAuth},
		// The Tiltfile's dev values (deploy/tilt/values.yaml).
		{name: "tilt-dev", file: "../deploy/tilt/values.yaml", check: checkTiltDev},
		// Variants of the defaults the four above do not cover.
		{name: "no-metrics-scrapers", overrides: map[string]any{"networkPolicy": map[string]any{"metricsFrom": []any{}}},
			check: checkNoScrapers},
		{name: "minimal", overrides: map[string]any{
			"networkPolicy": map[string]any{"enabled": false},
			"browser":       map[string]any{"autoscaling": map[string]any{"enabled": false}, "replicas": 3},
			"signer":        map[string]any{"enabled": false},
			"history":       map[string]any{"enabled": false},
			"agent":         map[string]any{"enabled": false},
		}, check: checkMinimal},
		// The agent with a hosted provider and its key in the chart's
		// Secret, autoscaled, and a self-hosted provider allowed.
		{name: "agent-provider", overrides: map[string]any{
			"secrets": map[string]any{"llmApiKey": testLLMKey, "secretKey": testSecrets["secretKey"]},
			"agent": map[string]any{
				"autoscaling": map[string]any{"enabled": true},
				"llm": map[string]any{
					"baseURL": "https://openrouter.ai/api/v1", "model": "openai/gpt-4.1-mini",
					"systemPrompt": "You drive a browser.\nBe brief.", "temperature": 0.2, "contextTokens": 128000, "stream": false,
				},
			},
			"networkPolicy": map[string]any{"agent": map[string]any{
				"providers": []any{map[string]any{"cidr": "10.0.5.20/32", "ports": []any{11434}}},
			}},
		}, check: checkAgentProvider},
		// The API key in a Secret of its own; temperature 0 (a real value,
		// not "unset").
		{name: "agent-existing-secret", overrides: map[string]any{"agent": map[string]any{"llm": map[string]any{
			"baseURL": "http://ollama.ollama:11434/v1", "model": "qwen3:8b", "temperature": 0,
			"existingSecret": "openai", "existingSecretKey": "token",
		}}}, check: checkAgentExistingSecret},
		// System tools for MCP clients too, on one shared ReadWriteMany
		// workspace behind two gateways; an unquoted YAML `on` is "on".
		{name: "system-tools-shared", overrides: map[string]any{"gateway": map[string]any{"systemTools": map[string]any{
			"mode":      true,
			"workspace": map[string]any{"persistence": map[string]any{"enabled": true, "storageClassName": "nfs"}},
		}}}, check: checkSystemToolsShared},
		// An unquoted YAML `off` is the boolean false: off.
		{name: "system-tools-yaml-off", overrides: map[string]any{"gateway": map[string]any{"systemTools": map[string]any{"mode": false}}},
			check: func(*testing.T, *manifest) {}},
		// System tools for agent runs on one gateway's emptyDir.
		{name: "system-tools-agent", overrides: map[string]any{"gateway": map[string]any{
			"replicas": 1, "systemTools": map[string]any{"mode": "agent"},
		}}, check: checkSystemToolsAgent},
		{name: "browser-seccomp-localhost", overrides: map[string]any{"browser": map[string]any{"chromeSandbox": "on", "securityContext": map[string]any{
			"seccompProfile": map[string]any{"type": "Localhost", "localhostProfile": "sovereign/chromium-seccomp.json"},
		}}}, check: checkBrowserSeccomp},
		{name: "public-url-and-ingress", overrides: map[string]any{"gateway": map[string]any{
			"publicURL":    "https://agents.example.net/",
			"allowedHosts": []any{"10.0.0.5"},
			"ingress":      map[string]any{"enabled": true, "host": "mcp.internal.example"},
		}}, check: checkPublicURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, readValues(t, tt.file, tt.overrides))
			checkInvariants(t, m)
			tt.check(t, m)
		})
	}
}

// checkInvariants holds for every set of values.
func checkInvariants(t *testing.T, m *manifest) {
	checkSecurity(t, m)
	checkWiring(t, m)
	checkServices(t, m)
	checkNetworkPolicies(t, m)
	checkSecrets(t, m)
	checkSigner(t, m)
	checkBrowser(t, m)
	checkAgent(t, m)
	checkSystemTools(t, m)
}

// checkSecurity: strict pod and container security contexts everywhere,
// no service account token, requests and memory limits set.
func checkSecurity(t *testing.T, m *manifest) {
	for name, tpl := range m.podSpecs() {
		spec := tpl.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken is not false", name)
		}
		if spec.ServiceAccountName != fullname {
			t.Errorf("%s: serviceAccountName = %q, want %q", name, spec.ServiceAccountName, fullname)
		}
		psc := spec.SecurityContext
		switch {
		case psc == nil:
			t.Errorf("%s: no pod securityContext", name)
		case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
			t.Errorf("%s: pod runAsNonRoot is not true", name)
		case psc.RunAsUser == nil || *psc.RunAsUser == 0:
			t.Errorf("%s: pod runAsUser is unset or 0", name)
		case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("%s: pod seccompProfile is not RuntimeDefault", name)
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s: uses a host namespace", name)
		}
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s: hostPath volume %s", name, v.Name)
			}
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			where := name + "/" + c.Name
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s: runAsNonRoot is not true", where)
			}
			if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				t.Errorf("%s: runAsUser is 0", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: privileged", where)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem is not true", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities = %+v, want drop ALL and add nothing", where, sc.Capabilities)
			}
			// RuntimeDefault, or a Localhost profile (Chromium's sandbox
			// needs one that allows user namespaces); never Unconfined.
			switch sp := sc.SeccompProfile; {
			case sp == nil:
				t.Errorf("%s: no seccompProfile", where)
			case sp.Type == corev1.SeccompProfileTypeLocalhost && sp.LocalhostProfile != nil && *sp.LocalhostProfile != "":
			case sp.Type != corev1.SeccompProfileTypeRuntimeDefault:
				t.Errorf("%s: seccompProfile %s, want RuntimeDefault or Localhost", where, sp.Type)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: no cpu or memory request", where)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: no memory limit", where)
			}
			// A read-only root needs somewhere to write.
			if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == "/tmp" }) {
				t.Errorf("%s: no writable /tmp", where)
			}
		}
	}
	for _, sa := range all[*corev1.ServiceAccount](m) {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s: automountServiceAccountToken is not false", sa.Name)
		}
	}
}

// checkWiring: images, listen addresses, probes and NATS_URL of every
// Sovereign service.
func checkWiring(t *testing.T, m *manifest) {
	wantNATS := "nats://" + fullname + "-nats:4222"
	if u := str(m.values, "nats", "external", "url"); u != "" {
		wantNATS = u
	}
	for svc, want := range services {
		name := fullname + "-" + svc
		if !has[*appsv1.Deployment](m, name) {
			if svc == "gateway" || svc == "browser" || boolean(m.values, svc, "enabled") {
				t.Errorf("no Deployment %s", name)
			}
			continue
		}
		d := find[*appsv1.Deployment](t, m, name)
		c := container(t, d)
		if !boolean(m.values, svc, "enabled") && svc != "gateway" && svc != "browser" {
			t.Errorf("%s is rendered although %s.enabled is false", name, svc)
		}
		if img := m.imageOf(svc); c.Image != img {
			t.Errorf("%s: image = %s, want %s", name, c.Image, img)
		}
		env := m.env(t, c)
		if got, wantListen := env[want.listenEnv], fmt.Sprintf("0.0.0.0:%d", want.port); got != wantListen {
			t.Errorf("%s: %s = %q, want %q", name, want.listenEnv, got, wantListen)
		}
		if env["NATS_URL"] != wantNATS {
			t.Errorf("%s: NATS_URL = %q, want %q", name, env["NATS_URL"], wantNATS)
		}
		if env["SOVEREIGN_LOG_FORMAT"] != "json" {
			t.Errorf("%s: SOVEREIGN_LOG_FORMAT = %q, want json", name, env["SOVEREIGN_LOG_FORMAT"])
		}
		// Probes: /readyz and /healthz on the port the service listens on.
		port := containerPort(c, want.port)
		if port == "" {
			t.Errorf("%s: no container port %d", name, want.port)
		}
		for _, p := range []struct {
			kind  string
			probe *corev1.Probe
			path  string
		}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
			switch {
			case p.probe == nil || p.probe.HTTPGet == nil:
				t.Errorf("%s: no HTTP %s probe", name, p.kind)
			case p.probe.HTTPGet.Path != p.path:
				t.Errorf("%s: %s probe path = %s, want %s", name, p.kind, p.probe.HTTPGet.Path, p.path)
			case p.probe.HTTPGet.Port != intstr.FromString(port):
				t.Errorf("%s: %s probe port = %s, want %s", name, p.kind, p.probe.HTTPGet.Port.String(), port)
			}
		}
		// Metrics scrape hints point at the same port.
		if a := d.Spec.Template.Annotations; a["prometheus.io/port"] != fmt.Sprint(want.port) || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: prometheus annotations = %v", name, a)
		}
	}
}

// checkServices: every Service, PDB and HPA points at pods and ports that
// exist; every volume's claim or ConfigMap exists.
func checkServices(t *testing.T, m *manifest) {
	pods := m.podSpecs()
	matching := func(sel labels.Selector) []corev1.PodTemplateSpec {
		var out []corev1.PodTemplateSpec
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
		return out
	}
	for _, s := range all[*corev1.Service](m) {
		ps := matching(labels.SelectorFromSet(s.Spec.Selector))
		if len(ps) != 1 {
			t.Errorf("Service %s selects %d pod templates, want 1", s.Name, len(ps))
			continue
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.Type == intstr.String && !slices.ContainsFunc(ps[0].Spec.Containers, func(c corev1.Container) bool {
				return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == sp.TargetPort.StrVal })
			}) {
				t.Errorf("Service %s: targetPort %s names no container port", s.Name, sp.TargetPort.StrVal)
			}
		}
	}
	for _, pdb := range all[*policyv1.PodDisruptionBudget](m) {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || len(matching(sel)) != 1 {
			t.Errorf("PodDisruptionBudget %s selects %d pod templates (%v), want 1", pdb.Name, len(matching(sel)), err)
		}
	}
	for _, h := range all[*autoscalingv2.HorizontalPodAutoscaler](m) {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || !has[*appsv1.Deployment](m, h.Spec.ScaleTargetRef.Name) {
			t.Errorf("HPA %s targets %+v, which is not rendered", h.Name, h.Spec.ScaleTargetRef)
		}
		if d := find[*appsv1.Deployment](t, m, h.Spec.ScaleTargetRef.Name); d.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas although the HPA %s scales it", d.Name, h.Name)
		}
	}
	claims := map[string]bool{}
	for _, pvc := range all[*corev1.PersistentVolumeClaim](m) {
		claims[pvc.Name] = true
	}
	for name, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && !claims[v.PersistentVolumeClaim.ClaimName] {
				t.Errorf("%s: volume %s claims %s, which is not rendered", name, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			if v.ConfigMap != nil && !has[*corev1.ConfigMap](m, v.ConfigMap.Name) {
				t.Errorf("%s: volume %s mounts ConfigMap %s, which is not rendered", name, v.Name, v.ConfigMap.Name)
			}
		}
	}
}

// checkNetworkPolicies: every pod is covered; only the gateway's MCP port
// admits traffic from outside the release; NATS admits clients only from
// the release's pods; the rest only metrics scrapes.
func checkNetworkPolicies(t *testing.T, m *manifest) {
	if !boolean(m.values, "networkPolicy", "enabled") {
		if n := len(all[*networkingv1.NetworkPolicy](m)); n > 0 {
			t.Errorf("networkPolicy.enabled is false but %d NetworkPolicies are rendered", n)
		}
		return
	}
	policies := all[*networkingv1.NetworkPolicy](m)
	metricsFrom := peers(t, m.values, "networkPolicy", "metricsFrom")
	gatewayFrom := peers(t, m.values, "networkPolicy", "gatewayFrom")
	byComponent := map[string]*networkingv1.NetworkPolicy{}
	for name, p := range m.podSpecs() {
		var covering []*networkingv1.NetworkPolicy
		for _, np := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatalf("NetworkPolicy %s: %v", np.Name, err)
			}
			if sel.Matches(labels.Set(p.Labels)) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				covering = append(covering, np)
			}
		}
		if len(covering) != 1 {
			t.Errorf("%s: %d NetworkPolicies restrict its ingress, want 1", name, len(covering))
			continue
		}
		byComponent[p.Labels["app.kubernetes.io/component"]] = covering[0]
	}
	for component, np := range byComponent {
		switch component {
		case "gateway":
			// MCP port open to gatewayFrom (everyone when empty), plus the
			// scrapers on the same port when gatewayFrom restricts it.
			want := []networkingv1.NetworkPolicyIngressRule{{Ports: tcp(8080), From: gatewayFrom}}
			if len(gatewayFrom) > 0 && len(metricsFrom) > 0 {
				want = append(want, networkingv1.NetworkPolicyIngressRule{Ports: tcp(8080), From: metricsFrom})
			}
			if !reflect.DeepEqual(np.Spec.Ingress, want) {
				t.Errorf("gateway ingress = %s, want %s", js(np.Spec.Ingress), js(want))
			}
		case "nats":
			release := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/name": "sovereign", "app.kubernetes.io/instance": releaseName}}}
			natsPods := networkingv1.NetworkPolicyPeer{PodSelector: &np.Spec.PodSelector}
			want := []networkingv1.NetworkPolicyIngressRule{
				{Ports: tcp(4222), From: []networkingv1.NetworkPolicyPeer{release}},
				{Ports: tcp(6222), From: []networkingv1.NetworkPolicyPeer{natsPods}},
			}
			if len(metricsFrom) > 0 {
				want = append(want, networkingv1.NetworkPolicyIngressRule{Ports: tcp(8222), From: metricsFrom})
			}
			if !reflect.DeepEqual(np.Spec.Ingress, want) {
				t.Errorf("nats ingress = %s, want %s", js(np.Spec.Ingress), js(want))
			}
		case "browser", "history", "signer", "agent":
			var want []networkingv1.NetworkPolicyIngressRule
			if len(metricsFrom) > 0 {
				want = []networkingv1.NetworkPolicyIngressRule{{Ports: tcp(int(services[component].port)), From: metricsFrom}}
			}
			if len(np.Spec.Ingress) != len(want) || (len(want) > 0 && !reflect.DeepEqual(np.Spec.Ingress, want)) {
				t.Errorf("%s ingress = %s, want only metrics scrapes %s", component, js(np.Spec.Ingress), js(want))
			}
		default:
			t.Errorf("pod component %q has no expectations", component)
		}
	}
	// The signer's and the agent's egress is closed but for NATS, DNS and
	// what is configured (the agent: its model provider).
	for _, component := range []string{"signer", "agent"} {
		np, ok := byComponent[component]
		if !ok {
			continue
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Fatalf("%s NetworkPolicy does not restrict egress", component)
		}
		natsPort := false
		for i, r := range np.Spec.Egress {
			if len(r.Ports) == 0 {
				t.Errorf("%s egress rule %d allows every port: %s", component, i, js(r))
			}
			for _, p := range r.Ports {
				if p.Port != nil && (p.Port.IntVal == 4222 || p.Port.IntVal == 4223) {
					natsPort = true
				}
			}
		}
		if !natsPort {
			t.Errorf("%s egress has no NATS rule: %s", component, js(np.Spec.Egress))
		}
		// NATS: the in-chart servers' pods on the client port.
		if boolean(m.values, "nats", "cluster", "enabled") {
			natsPods := m.podSpecs()[fullname+"-nats"].Labels
			if !egressAllowsPod(np, natsPods, 4222) {
				t.Errorf("%s egress does not reach the NATS pods on 4222: %s", component, js(np.Spec.Egress))
			}
		}
		// Nothing else of the release: not the gateway's port, say.
		if gw := m.podSpecs()[fullname+"-gateway"].Labels; egressAllowsPod(np, gw, 8080) {
			t.Errorf("%s egress reaches the gateway pods on 8080", component)
		}
	}
}

// checkSecrets: secret values appear only in the chart's Secret, each env
// var that needs one refers to it, and ConfigMaps hold none.
func checkSecrets(t *testing.T, m *manifest) {
	sec := mapAt(m.values, "secrets")
	existing, _ := sec["existingSecret"].(string)
	var values []string
	for _, k := range []string{"adminToken", "secretKey", "signerPassphrase", "historyDSN", "llmApiKey"} {
		if v, _ := sec[k].(string); v != "" {
			values = append(values, v)
		}
	}
	secrets := all[*corev1.Secret](m)
	switch {
	case existing != "" && len(secrets) > 0:
		t.Errorf("secrets.existingSecret is set but the chart renders Secret %s", secrets[0].Name)
	case existing == "" && len(values) == 0 && len(secrets) > 0:
		t.Errorf("no secret value is set but the chart renders Secret %s", secrets[0].Name)
	case existing == "" && len(values) > 0 && len(secrets) != 1:
		t.Errorf("%d Secrets rendered, want 1", len(secrets))
	}
	wantSecret := fullname
	if existing != "" {
		wantSecret = existing
	}
	// The agent's API key may come from a Secret of its own.
	llmSecret := str(m.values, "agent", "llm", "existingSecret")
	secretKeyNames := regexp.MustCompile(`(?i)token|secret|passphrase|password|dsn|key`)
	for _, cm := range all[*corev1.ConfigMap](m) {
		for k, v := range cm.Data {
			if secretKeyNames.MatchString(k) {
				t.Errorf("ConfigMap %s has key %s, which sounds secret", cm.Name, k)
			}
			for _, s := range values {
				if strings.Contains(v, s) {
					t.Errorf("ConfigMap %s key %s holds a secret value", cm.Name, k)
				}
			}
		}
	}
	for name, p := range m.podSpecs() {
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					for _, s := range values {
						if strings.Contains(e.Value, s) {
							t.Errorf("%s: env %s holds a secret value literally", name, e.Name)
						}
					}
					if e.Value != "" && regexp.MustCompile(`TOKEN$|KEY$|PASSPHRASE$|DSN$`).MatchString(e.Name) {
						t.Errorf("%s: env %s is set literally, not from the Secret", name, e.Name)
					}
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if ref == nil {
					continue
				}
				if e.Name == "SOVEREIGN_LLM_API_KEY" && llmSecret != "" {
					if ref.Name != llmSecret || ref.Key != str(m.values, "agent", "llm", "existingSecretKey") || (ref.Optional != nil && *ref.Optional) {
						t.Errorf("%s: env %s refers to %s, want the required key %s of agent.llm.existingSecret %s",
							name, e.Name, js(ref), str(m.values, "agent", "llm", "existingSecretKey"), llmSecret)
					}
					continue
				}
				if ref.Name != wantSecret {
					t.Errorf("%s: env %s refers to Secret %s, want %s", name, e.Name, ref.Name, wantSecret)
				}
				if existing == "" {
					if len(secrets) != 1 || secrets[0].Data[ref.Key] == nil {
						t.Errorf("%s: env %s refers to key %s, which the rendered Secret lacks", name, e.Name, ref.Key)
					}
				}
			}
		}
	}
}

func checkSigner(t *testing.T, m *manifest) {
	name := fullname + "-signer"
	if !has[*appsv1.Deployment](m, name) {
		return
	}
	d := find[*appsv1.Deployment](t, m, name)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("signer replicas = %v, want 1", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("signer strategy = %q, want Recreate", d.Spec.Strategy.Type)
	}
}

func checkBrowser(t *testing.T, m *manifest) {
	d := find[*appsv1.Deployment](t, m, fullname+"-browser")
	spec := d.Spec.Template.Spec
	c := container(t, d)
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	shm := mounts["/dev/shm"]
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == shm })
	if shm == "" || i < 0 || spec.Volumes[i].EmptyDir == nil || spec.Volumes[i].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("browser: /dev/shm is not a memory-backed emptyDir: mounts %v", mounts)
	} else if spec.Volumes[i].EmptyDir.SizeLimit == nil || spec.Volumes[i].EmptyDir.SizeLimit.IsZero() {
		t.Errorf("browser: /dev/shm has no size limit")
	}
	env := m.env(t, c)
	if home := env["HOME"]; home == "" || mounts[home] == "" {
		t.Errorf("browser: HOME %q is not a writable volume (mounts %v)", home, mounts)
	}
	if env["SOVEREIGN_MAX_SESSIONS"] != fmt.Sprint(num(m.values, "browser", "maxSessions")) {
		t.Errorf("browser: SOVEREIGN_MAX_SESSIONS = %q", env["SOVEREIGN_MAX_SESSIONS"])
	}
	// The HPA: CPU and open sessions per pod, as configured.
	if !boolean(m.values, "browser", "autoscaling", "enabled") {
		return
	}
	h := find[*autoscalingv2.HorizontalPodAutoscaler](t, m, fullname+"-browser")
	var cpu, sessions bool
	for _, mt := range h.Spec.Metrics {
		switch {
		case mt.Type == autoscalingv2.ResourceMetricSourceType && mt.Resource.Name == corev1.ResourceCPU:
			cpu = mt.Resource.Target.Type == autoscalingv2.UtilizationMetricType && mt.Resource.Target.AverageUtilization != nil
		case mt.Type == autoscalingv2.PodsMetricSourceType && mt.Pods.Metric.Name == "sovereign_browser_sessions_open":
			want := resource.NewMilliQuantity(int64(num(m.values, "browser", "maxSessions")*num(m.values, "browser", "autoscaling", "sessions", "targetPercentOfCapacity")*10), resource.DecimalSI)
			sessions = mt.Pods.Target.Type == autoscalingv2.AverageValueMetricType && mt.Pods.Target.AverageValue.Cmp(*want) == 0
			if !sessions {
				t.Errorf("browser HPA sessions target = %v, want average %v", mt.Pods.Target, want)
			}
		default:
			t.Errorf("browser HPA has an unexpected metric %s", js(mt))
		}
	}
	if wantCPU := boolean(m.values, "browser", "autoscaling", "cpu", "enabled"); cpu != wantCPU {
		t.Errorf("browser HPA CPU metric present = %v, want %v", cpu, wantCPU)
	}
	if wantSessions := boolean(m.values, "browser", "autoscaling", "sessions", "enabled"); sessions != wantSessions {
		t.Errorf("browser HPA sessions metric present = %v, want %v", sessions, wantSessions)
	}
}

// The cases.

func checkDefault(t *testing.T, m *manifest) {
	// In-chart NATS, SQLite history, nothing secret, no ingress.
	ss := find[*appsv1.StatefulSet](t, m, fullname+"-nats")
	if *ss.Spec.Replicas != 3 || ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || len(ss.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("nats StatefulSet: replicas %d, policy %s, %d claim templates", *ss.Spec.Replicas, ss.Spec.PodManagementPolicy, len(ss.Spec.VolumeClaimTemplates))
	}
	if s := find[*corev1.Service](t, m, fullname+"-nats-headless"); s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
		t.Errorf("nats headless Service: clusterIP %q, publishNotReadyAddresses %v", s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
	}
	if len(all[*corev1.Secret](m)) != 0 {
		t.Error("a Secret is rendered with no secret values set")
	}
	for name, p := range m.podSpecs() {
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					t.Errorf("%s: env %s refers to a Secret although none is configured", name, e.Name)
				}
			}
		}
	}
	h := find[*appsv1.Deployment](t, m, fullname+"-history")
	if *h.Spec.Replicas != 1 || h.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("SQLite history: replicas %d, strategy %s; want 1, Recreate", *h.Spec.Replicas, h.Spec.Strategy.Type)
	}
	if env := m.env(t, container(t, h)); env["SOVEREIGN_DATA_DIR"] != "/data" || env["SOVEREIGN_HISTORY_DSN"] != "" {
		t.Errorf("SQLite history env: %v", env)
	}
	find[*corev1.PersistentVolumeClaim](t, m, fullname+"-history-data")
	if len(all[*networkingv1.Ingress](m)) != 0 {
		t.Error("an Ingress is rendered although gateway.ingress.enabled is false")
	}
	// Without an ingress, the gateway accepts its in-cluster names, the
	// fully qualified one too (make e2e-helm's cluster refused it).
	env := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-gateway")))
	hosts := strings.Split(env["SOVEREIGN_ALLOWED_HOSTS"], ",")
	for _, h := range []string{fullname + "-gateway", fullname + "-gateway." + namespace + ".svc", fullname + "-gateway." + namespace + ".svc.cluster.local"} {
		if !slices.Contains(hosts, h) {
			t.Errorf("gateway SOVEREIGN_ALLOWED_HOSTS = %v, want %s among them", hosts, h)
		}
	}
	if _, ok := env["SOVEREIGN_PUBLIC_URL"]; ok {
		t.Errorf("gateway SOVEREIGN_PUBLIC_URL = %q with no ingress or publicURL", env["SOVEREIGN_PUBLIC_URL"])
	}
	if _, ok := env["SOVEREIGN_INSECURE_NO_AUTH"]; ok {
		t.Error("gateway runs with SOVEREIGN_INSECURE_NO_AUTH by default")
	}
	if !strings.Contains(m.notes, "sovereign token create") || !strings.Contains(m.notes, "claude mcp add --transport http sovereign http://localhost:8080/mcp") {
		t.Errorf("NOTES do not say how to create a token and connect:\n%s", m.notes)
	}
	// The agent runs by default, two replicas without a provider: the
	// NOTES say how to set one.
	if a := find[*appsv1.Deployment](t, m, fullname+"-agent"); a.Spec.Replicas == nil || *a.Spec.Replicas != 2 {
		t.Errorf("agent replicas = %v, want 2", a.Spec.Replicas)
	}
	if !strings.Contains(m.notes, "No model provider is set") || !strings.Contains(m.notes, "console cannot store a model provider's API key") {
		t.Errorf("NOTES do not say the agent needs a provider:\n%s", m.notes)
	}
}

func checkExternal(t *testing.T, m *manifest) {
	if has[*appsv1.StatefulSet](m, fullname+"-nats") || has[*corev1.Service](m, fullname+"-nats") {
		t.Error("in-chart NATS rendered with an external NATS URL")
	}
	if n := len(all[*corev1.Secret](m)); n != 0 {
		t.Errorf("%d Secrets rendered with secrets.existingSecret set", n)
	}
	h := find[*appsv1.Deployment](t, m, fullname+"-history")
	if *h.Spec.Replicas != 2 || h.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("PostgreSQL history: replicas %d, strategy %s; want 2, RollingUpdate", *h.Spec.Replicas, h.Spec.Strategy.Type)
	}
	if has[*corev1.PersistentVolumeClaim](m, fullname+"-history-data") {
		t.Error("a SQLite volume is rendered for PostgreSQL history")
	}
	// The DSN comes from the existing Secret, required; the optional
	// secrets are optional there.
	refs := map[string]*corev1.SecretKeySelector{}
	for _, d := range all[*appsv1.Deployment](m) {
		for _, e := range container(t, d).Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				refs[e.Name] = e.ValueFrom.SecretKeyRef
			}
		}
	}
	for env, key := range map[string]string{
		"SOVEREIGN_HISTORY_DSN": "history-dsn", "SOVEREIGN_ADMIN_TOKEN": "admin-token",
		"SOVEREIGN_SECRET_KEY": "secret-key", "SOVEREIGN_SIGNER_PASSPHRASE": "signer-passphrase",
		"SOVEREIGN_LLM_API_KEY": "llm-api-key",
	} {
		ref := refs[env]
		if ref == nil || ref.Name != "sovereign-secrets" || ref.Key != key {
			t.Errorf("%s refers to %+v, want sovereign-secrets/%s", env, ref, key)
			continue
		}
		optional := ref.Optional != nil && *ref.Optional
		if optional != (env != "SOVEREIGN_HISTORY_DSN") {
			t.Errorf("%s: optional = %v", env, optional)
		}
	}
	// The signer reaches the external NATS on both its ports, in its namespace only.
	np := find[*networkingv1.NetworkPolicy](t, m, fullname+"-signer")
	want := networkingv1.NetworkPolicyEgressRule{
		Ports: append(tcp(4222), tcp(4223)...),
		To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": "infra"}}}},
	}
	if !slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool { return reflect.DeepEqual(r, want) }) {
		t.Errorf("signer egress = %s, want a rule %s", js(np.Spec.Egress), js(want))
	}
	if len(all[*networkingv1.NetworkPolicy](m)) != 5 {
		t.Errorf("NetworkPolicies: %v, want gateway, browser, history, signer and agent", m.names())
	}
	// The agent reaches the external NATS on both ports, anywhere (its
	// externalNatsTo is empty).
	anp := find[*networkingv1.NetworkPolicy](t, m, fullname+"-agent")
	for _, port := range []int32{4222, 4223} {
		if !egressAllowsIP(anp, "10.96.0.7", port) {
			t.Errorf("agent egress does not reach the external NATS on %d: %s", port, js(anp.Spec.Egress))
		}
	}
}

func checkNATSCluster(t *testing.T, m *manifest) {
	// Every service keeps its streams and buckets on as many servers as the
	// cluster has, so that losing one loses nothing.
	servers := *find[*appsv1.StatefulSet](t, m, fullname+"-nats").Spec.Replicas
	for _, d := range all[*appsv1.Deployment](m) {
		if got := m.env(t, container(t, d))["SOVEREIGN_NATS_REPLICAS"]; got != fmt.Sprint(servers) {
			t.Errorf("%s: SOVEREIGN_NATS_REPLICAS = %q, want %d (the NATS servers)", d.Name, got, servers)
		}
	}
	s := find[*corev1.Secret](t, m, fullname)
	for key, v := range map[string]any{
		"admin-token": testSecrets["adminToken"], "secret-key": testSecrets["secretKey"], "signer-passphrase": testSecrets["signerPassphrase"],
	} {
		if string(s.Data[key]) != v {
			t.Errorf("Secret key %s = %q, want %q", key, s.Data[key], v)
		}
	}
	if _, ok := s.Data["history-dsn"]; ok || len(s.Data) != 3 {
		t.Errorf("Secret keys: %v, want the three set", slices.Sorted(maps.Keys(s.Data)))
	}
	ss := find[*appsv1.StatefulSet](t, m, fullname+"-nats")
	pvc := ss.Spec.VolumeClaimTemplates[0].Spec
	if pvc.StorageClassName == nil || *pvc.StorageClassName != "fast-ssd" || pvc.Resources.Requests.Storage().String() != "20Gi" {
		t.Errorf("nats claim template: %s", js(pvc))
	}
	// Tracing: every Sovereign pod exports to the collector, and the signer may reach it.
	for _, d := range all[*appsv1.Deployment](m) {
		env := m.env(t, container(t, d))
		if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://otel-collector.observability:4317" ||
			!strings.Contains(env["OTEL_RESOURCE_ATTRIBUTES"], "k8s.pod.name=$(POD_NAME)") ||
			!strings.HasSuffix(env["OTEL_RESOURCE_ATTRIBUTES"], ",deployment.environment=staging") {
			t.Errorf("%s: OTEL env = %q, %q", d.Name, env["OTEL_EXPORTER_OTLP_ENDPOINT"], env["OTEL_RESOURCE_ATTRIBUTES"])
		}
	}
	np := find[*networkingv1.NetworkPolicy](t, m, fullname+"-signer")
	if !slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return reflect.DeepEqual(r.Ports, tcp(4317))
	}) {
		t.Errorf("signer egress has no rule for the OTLP port: %s", js(np.Spec.Egress))
	}
	if h := find[*autoscalingv2.HorizontalPodAutoscaler](t, m, fullname+"-browser"); *h.Spec.MinReplicas != 3 || h.Spec.MaxReplicas != 20 {
		t.Errorf("browser HPA bounds %d..%d, want 3..20", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
}

func checkIngressOAuth(t *testing.T, m *manifest) {
	ing := find[*networkingv1.Ingress](t, m, fullname+"-gateway")
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("ingress class = %v, want nginx", ing.Spec.IngressClassName)
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != fullname+"-gateway-tls" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{"mcp.example.com"}) {
		t.Errorf("ingress TLS = %s", js(ing.Spec.TLS))
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "mcp.example.com" {
		t.Fatalf("ingress rules = %s", js(ing.Spec.Rules))
	}
	var paths []string
	for _, p := range ing.Spec.Rules[0].HTTP.Paths {
		paths = append(paths, p.Path)
		if p.Backend.Service == nil || p.Backend.Service.Name != fullname+"-gateway" || p.Backend.Service.Port.Name != "http" {
			t.Errorf("ingress path %s goes to %s", p.Path, js(p.Backend))
		}
	}
	// /metrics, /healthz and /readyz stay inside the cluster.
	if !slices.Equal(paths, []string{"/mcp", "/.well-known/oauth-protected-resource"}) {
		t.Errorf("ingress paths = %v, want only /mcp and the OAuth metadata", paths)
	}
	env := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-gateway")))
	if hosts := strings.Split(env["SOVEREIGN_ALLOWED_HOSTS"], ","); !slices.Contains(hosts, "mcp.example.com") {
		t.Errorf("gateway SOVEREIGN_ALLOWED_HOSTS = %v, want mcp.example.com among them", hosts)
	}
	for k, want := range map[string]string{
		"SOVEREIGN_PUBLIC_URL":     "https://mcp.example.com",
		"SOVEREIGN_OAUTH_ISSUER":   "https://auth.example.com/",
		"SOVEREIGN_OAUTH_AUDIENCE": "https://mcp.example.com/mcp",
		"SOVEREIGN_POLICY_FILE":    "/etc/sovereign/policy/gateway-policy.yaml",
	} {
		if env[k] != want {
			t.Errorf("gateway %s = %q, want %q", k, env[k], want)
		}
	}
	senv := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-signer")))
	if senv["SOVEREIGN_SIGNER_POLICY"] != "/etc/sovereign/policy/signer-policy.yaml" {
		t.Errorf("signer SOVEREIGN_SIGNER_POLICY = %q", senv["SOVEREIGN_SIGNER_POLICY"])
	}
	cm := find[*corev1.ConfigMap](t, m, fullname+"-policy")
	if !strings.Contains(cm.Data["gateway-policy.yaml"], "block_private: true") || !strings.Contains(cm.Data["signer-policy.yaml"], "origin: https://snort.social") {
		t.Errorf("policy ConfigMap = %v", cm.Data)
	}
	if !strings.Contains(m.notes, "claude mcp add --transport http sovereign https://mcp.example.com/mcp") {
		t.Errorf("NOTES do not connect to the ingress URL:\n%s", m.notes)
	}
}

func checkNoScrapers(t *testing.T, m *manifest) {
	// No metrics scrapers: workers, signer and history admit nothing.
	for _, c := range []string{"browser", "history", "signer"} {
		if np := find[*networkingv1.NetworkPolicy](t, m, fullname+"-"+c); len(np.Spec.Ingress) != 0 {
			t.Errorf("%s ingress = %s, want none", c, js(np.Spec.Ingress))
		}
	}
	for _, d := range all[*appsv1.Deployment](m) {
		if a := d.Spec.Template.Annotations["prometheus.io/scrape"]; a != "true" {
			t.Errorf("%s: prometheus.io/scrape = %q", d.Name, a)
		}
	}
}

func checkMinimal(t *testing.T, m *manifest) {
	if n := len(all[*autoscalingv2.HorizontalPodAutoscaler](m)); n != 0 {
		t.Errorf("%d HPAs with autoscaling off", n)
	}
	if d := find[*appsv1.Deployment](t, m, fullname+"-browser"); d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("browser replicas = %v, want 3", d.Spec.Replicas)
	}
	for _, name := range []string{"-signer", "-history", "-agent", "-signer-data", "-history-data"} {
		if has[*appsv1.Deployment](m, fullname+name) || has[*corev1.PersistentVolumeClaim](m, fullname+name) {
			t.Errorf("%s rendered although disabled", fullname+name)
		}
	}
	if strings.Contains(m.notes, "exec deploy/"+fullname+"-history") {
		t.Errorf("NOTES send the user to the disabled history Deployment:\n%s", m.notes)
	}
	if has[*corev1.Service](m, fullname+"-agent") || has[*policyv1.PodDisruptionBudget](m, fullname+"-agent") || strings.Contains(m.notes, "The agent") {
		t.Errorf("agent.enabled=false still renders the agent: %v\n%s", m.names(), m.notes)
	}
}

func checkBrowserSeccomp(t *testing.T, m *manifest) {
	for _, d := range all[*appsv1.Deployment](m) {
		sc := container(t, d).SecurityContext
		want := corev1.SeccompProfileTypeRuntimeDefault
		if d.Name == fullname+"-browser" {
			want = corev1.SeccompProfileTypeLocalhost
			if env := m.env(t, container(t, d)); env["SOVEREIGN_CHROME_SANDBOX"] != "on" {
				t.Errorf("browser with the Localhost profile: SOVEREIGN_CHROME_SANDBOX = %q, want on", env["SOVEREIGN_CHROME_SANDBOX"])
			}
			if *sc.RunAsUser != 10001 || *d.Spec.Template.Spec.SecurityContext.RunAsUser != 10001 {
				t.Errorf("browser runs as %d (pod %d), want the image's user 10001", *sc.RunAsUser, *d.Spec.Template.Spec.SecurityContext.RunAsUser)
			}
		}
		if sc.SeccompProfile.Type != want {
			t.Errorf("%s: seccompProfile %s, want %s", d.Name, sc.SeccompProfile.Type, want)
		}
		// The override changes only what it names.
		if !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: the override loosened the rest of the security context: %s", d.Name, js(sc))
		}
	}
}

func checkPublicURL(t *testing.T, m *manifest) {
	env := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-gateway")))
	if env["SOVEREIGN_PUBLIC_URL"] != "https://agents.example.net" {
		t.Errorf("SOVEREIGN_PUBLIC_URL = %q, want https://agents.example.net", env["SOVEREIGN_PUBLIC_URL"])
	}
	hosts := strings.Split(env["SOVEREIGN_ALLOWED_HOSTS"], ",")
	for _, h := range []string{"mcp.internal.example", "agents.example.net", "10.0.0.5", fullname + "-gateway"} {
		if !slices.Contains(hosts, h) {
			t.Errorf("SOVEREIGN_ALLOWED_HOSTS = %v, want %s among them", hosts, h)
		}
	}
}

// Helpers.

func tcp(ports ...int) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		proto, port := corev1.ProtocolTCP, intstr.FromInt32(int32(p))
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return out
}

func containerPort(c corev1.Container, port int32) string {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return p.Name
		}
	}
	return ""
}

// peers converts a values list of NetworkPolicyPeers to the API type.
func peers(t *testing.T, v map[string]any, path ...string) []networkingv1.NetworkPolicyPeer {
	t.Helper()
	raw := at(v, path...)
	if raw == nil {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out []networkingv1.NetworkPolicyPeer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %v", path, err)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func at(v map[string]any, path ...string) any {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func mapAt(v map[string]any, path ...string) map[string]any {
	m, _ := at(v, path...).(map[string]any)
	return m
}

func str(v map[string]any, path ...string) string { s, _ := at(v, path...).(string); return s }

func boolean(v map[string]any, path ...string) bool { b, _ := at(v, path...).(bool); return b }

func num(v map[string]any, path ...string) int {
	switch n := at(v, path...).(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkTiltDev: the dev loop's images are the ones the Tiltfile builds, one
// replica each, and the gateway runs without auth (Tilt reaches it through a
// port-forward on 127.0.0.1 only).
func checkTiltDev(t *testing.T, m *manifest) {
	for _, d := range all[*appsv1.Deployment](m) {
		img := container(t, d).Image
		if !strings.HasPrefix(img, "sovereign-dev/sovereign-") || !strings.HasSuffix(img, ":tilt") {
			t.Errorf("%s: image %s, want sovereign-dev/sovereign-<svc>:tilt (the Tiltfile's docker_build refs)", d.Name, img)
		}
		if *d.Spec.Replicas != 1 {
			t.Errorf("%s: %d replicas, want 1", d.Name, *d.Spec.Replicas)
		}
	}
	env := m.env(t, container(t, find[*appsv1.Deployment](t, m, fullname+"-gateway")))
	if env["SOVEREIGN_INSECURE_NO_AUTH"] != "true" {
		t.Errorf("gateway SOVEREIGN_INSECURE_NO_AUTH = %q, want true", env["SOVEREIGN_INSECURE_NO_AUTH"])
	}
}

// imageOf is the image the values name for svc: registry/prefix-svc:tag,
// the tag defaulting to the chart's appVersion (0.1.0).
func (m *manifest) imageOf(svc string) string {
	str := func(path, def string) string {
		if v, err := m.values.PathValue(path); err == nil {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
		return def
	}
	return str("image.registry", "ghcr.io") + "/" + str("image.repositoryPrefix", "sovereign-fleet/sovereign") +
		"-" + svc + ":" + str("image.tag", "0.1.0")
}
