package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// EnvHelm turns on TestHelm, which needs root, a Docker engine holding the
// project's images, and what scripts/k8s-local.sh builds and installs
// (make e2e-helm provides them all). EnvHelmTag names the images' tag
// (default dev, what make images builds); EnvHelmKeep leaves the cluster
// running after the test, to look at it (k8s-local.sh down removes it).
const (
	EnvHelm     = "SOVEREIGN_E2E_HELM"
	EnvHelmTag  = "SOVEREIGN_E2E_HELM_TAG"
	EnvHelmKeep = "SOVEREIGN_E2E_HELM_KEEP"
)

// The release TestHelm installs, and the images it loads into the cluster.
const (
	helmRelease     = "sovereign"
	helmNamespace   = "sovereign-e2e-helm"
	helmImages      = "ghcr.io/sovereign-fleet/sovereign-"
	helmNATSImage   = "nats:2.15.3-alpine"
	helmJaegerImage = "jaegertracing/jaeger:2.13.0" // testdata/helm-jaeger.yaml
)

// TestHelm installs charts/sovereign with Helm on a one-node Kubernetes
// built from upstream parts (scripts/k8s-local.sh), as the chart's NOTES
// tell an operator: install (traces to a Jaeger beside it), an API token
// created in the history pod, the gateways restarted. Then every pod must
// be Ready; MCP clients through the gateway's Service must open pages on
// every browser pod; a call's trace must reach Jaeger; the security
// contexts must hold with Chromium running; the HPA and the browser PDB
// must act as intended, a browser pod deleted with --force must leave its
// session to the other worker, and a helm upgrade must roll every
// Deployment and keep the sessions. The cluster is torn down at the end,
// also on failure.
func TestHelm(t *testing.T) {
	if os.Getenv(EnvHelm) == "" {
		t.Skipf("set %s=1 (make e2e-helm) to run the chart on a local Kubernetes", EnvHelm)
	}
	ctx := callCtx(t, 40*time.Minute)
	k := newKubeCluster(t, ctx)
	tag := os.Getenv(EnvHelmTag)
	if tag == "" {
		tag = "dev"
	}
	var images []string
	for _, svc := range []string{"gateway", "browser", "signer", "history", "agent"} {
		images = append(images, helmImages+svc+":"+tag)
	}
	k.script(ctx, append([]string{"load", helmNATSImage, helmJaegerImage}, images...)...)

	// Jaeger first, where the release sends its traces.
	k.run(ctx, "kubectl", "create", "namespace", helmNamespace)
	k.run(ctx, "kubectl", "apply", "-f", filepath.Join(k.root, "e2e", "testdata", "helm-jaeger.yaml"))
	start := time.Now()
	k.run(ctx, "helm", "install", helmRelease, filepath.Join(k.root, "charts", "sovereign"),
		"--namespace", helmNamespace, "-f", filepath.Join(k.root, "e2e", "testdata", "helm-local-values.yaml"),
		"--set", "image.tag="+tag, "--set", "telemetry.otlpEndpoint=http://jaeger:4317")
	history := "deploy/" + helmRelease + "-history"
	k.run(ctx, "kubectl", "rollout", "status", history, "--timeout=10m")
	// The Service's fully qualified name, as in-cluster clients write it.
	gatewayHost := helmRelease + "-gateway." + helmNamespace + ".svc.cluster.local"
	out := k.run(ctx, "kubectl", "exec", history, "--", "/sovereign", "token", "create",
		"--name", "e2e-helm", "--max-sessions", "64", "--url", "http://"+gatewayHost+":8080/mcp")
	token := regexp.MustCompile(`svt_[A-Za-z0-9_-]+`).FindString(out)
	if token == "" {
		t.Fatalf("token create printed no svt_ token:\n%s", out)
	}
	k.run(ctx, "kubectl", "rollout", "restart", "deploy/"+helmRelease+"-gateway")
	k.allReady(ctx, 10*time.Minute)
	t.Logf("every pod Ready %s after helm install", time.Since(start).Round(time.Second))

	// MCP through the gateway's Service (its ClusterIP, routed by
	// kube-proxy on this node); the workers found on NATS, through its
	// Service too.
	gateway := "http://" + k.clusterIP(ctx, helmRelease+"-gateway") + ":8080/mcp"
	bc := k.bus(ctx)
	workers := kittest.EventuallyValue(t, 2*time.Minute, func() ([]string, error) {
		ids := discoverWorkers(ctx, bc)
		return ids, kittest.Check(len(ids) >= 2, "workers on the bus: %v, want 2", ids)
	})
	clients := spreadSessions(t, ctx, bc, workers, 1, func() *harness.MCPClient {
		c := harness.NewMCPClient(gateway)
		c.Host = gatewayHost
		c.Header.Set("Authorization", "Bearer "+token)
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatalf("initialize %s (Host %s): %v", gateway, gatewayHost, err)
		}
		return c
	})
	lat := browseForm(t, ctx, clients, 5)
	t.Logf("latency of one eval call through the gateway Service (%d calls on %d workers): %s", len(lat), len(workers), summarize(lat))

	// One call's trace in Jaeger, with the gateway's and a worker's spans.
	traceOneCall(t, ctx, &harness.Jaeger{Query: "http://" + k.clusterIP(ctx, "jaeger") + ":16686"}, clients[1].MCPClient)

	// The security contexts hold with Chromium running.
	victim := clients[0]
	k.checkBrowserPod(ctx, workerPod(victim.Worker))
	k.checkAutoscaler(ctx)

	// A browser pod deleted with --force: its session comes back, on the
	// other worker, in the same MCP session.
	k.run(ctx, "kubectl", "delete", "pod", workerPod(victim.Worker), "--force", "--grace-period=0")
	deleted := time.Now()
	kittest.Eventually(t, 2*time.Minute, func() error {
		_, err := callText(ctx, victim.MCPClient, "get_url", nil)
		return err
	})
	t.Logf("the session of the force-deleted pod answered again %s after the delete", time.Since(deleted).Round(time.Millisecond))
	k.allReady(ctx, 5*time.Minute)

	// The browser pods' disruption budget: one eviction at a time.
	k.checkDisruptionBudget(ctx, "browser")

	// helm upgrade with a setting every Deployment's pods carry (the log
	// level is in their config checksum): each rolls, one pod at a time
	// where its strategy says so, and every pod is Ready again. Then both
	// clients' sessions answer, restored on the new workers. (Calls made
	// during the roll may fail until workers hand their sessions over on
	// SIGTERM: issue 27, items 1 and 3.)
	start = time.Now()
	k.run(ctx, "helm", "upgrade", helmRelease, filepath.Join(k.root, "charts", "sovereign"),
		"--reuse-values", "--set", "log.level=debug", "--wait", "--timeout", "10m")
	k.allReady(ctx, 5*time.Minute)
	for _, c := range clients {
		kittest.Eventually(t, 2*time.Minute, func() error {
			_, err := callText(ctx, c.MCPClient, "get_url", nil)
			return err
		})
	}
	t.Logf("helm upgrade rolled every Deployment and the sessions answered again in %s", time.Since(start).Round(time.Second))
}

// workerPod is the pod a browser worker runs in: a worker's id is its host
// name (the pod's name) and a random suffix.
func workerPod(worker string) string { return worker[:strings.LastIndex(worker, "-")] }

// checkBrowserPod checks, inside the browser pod, that Chromium runs under
// the chart's security context: non-root, no capabilities, no privilege
// escalation, a seccomp filter, a read-only root filesystem.
func (k *kubeCluster) checkBrowserPod(ctx context.Context, pod string) {
	k.t.Helper()
	out := k.run(ctx, "kubectl", "exec", pod, "--", "sh", "-c",
		`id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; touch /probe 2>&1; cat /proc/[0-9]*/comm 2>/dev/null | grep -c chromium`)
	for _, w := range []string{"10001\n", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "Read-only file system"} {
		if !strings.Contains(out, w) {
			k.t.Errorf("in %s: %q missing from\n%s", pod, w, out)
		}
	}
	if n := lastLine(out); n == "0" {
		k.t.Errorf("in %s: no Chromium process:\n%s", pod, out)
	}
}

// checkAutoscaler checks the browser HPA: it targets the browser
// Deployment and holds it at minReplicas. It cannot act on metrics here:
// this cluster has neither metrics-server nor a custom metrics adapter.
func (k *kubeCluster) checkAutoscaler(ctx context.Context) {
	k.t.Helper()
	out := k.run(ctx, "kubectl", "get", "hpa", helmRelease+"-browser", "-o",
		"jsonpath={.spec.scaleTargetRef.kind}/{.spec.scaleTargetRef.name} {.spec.minReplicas} {.status.desiredReplicas}")
	if want := "Deployment/" + helmRelease + "-browser 2 2"; out != want {
		k.t.Errorf("browser HPA: target, minReplicas, desiredReplicas = %q, want %q", out, want)
	}
}

// checkDisruptionBudget evicts the component's pods through the Eviction
// API (what kubectl drain does): the first eviction is allowed, the second,
// while the first pod's replacement is not Ready, is refused.
func (k *kubeCluster) checkDisruptionBudget(ctx context.Context, component string) {
	k.t.Helper()
	pods := strings.Fields(k.run(ctx, "kubectl", "get", "pods", "-l", "app.kubernetes.io/component="+component,
		"-o", "jsonpath={.items[*].metadata.name}"))
	if len(pods) < 2 {
		k.t.Fatalf("%s pods: %v, want 2 or more", component, pods)
	}
	evict := func(pod string) (string, error) {
		f := filepath.Join(k.t.TempDir(), "eviction.json")
		body := fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, pod, helmNamespace)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			k.t.Fatal(err)
		}
		return k.try(ctx, "kubectl", "create", "--raw", "/api/v1/namespaces/"+helmNamespace+"/pods/"+pod+"/eviction", "-f", f)
	}
	if out, err := evict(pods[0]); err != nil {
		k.t.Fatalf("evict %s: %v\n%s", pods[0], err, out)
	}
	out, err := evict(pods[1])
	if err == nil || !strings.Contains(out, "disruption budget") {
		k.t.Errorf("evict %s right after %s: %v %s, want it refused by the disruption budget", pods[1], pods[0], err, out)
	}
	k.allReady(ctx, 5*time.Minute)
}

// kubeCluster is the cluster of scripts/k8s-local.sh, up for one test.
type kubeCluster struct {
	t          *testing.T
	root       string // the repository
	bin        string // kubectl, helm and the cluster's binaries
	kubeconfig string
}

// newKubeCluster builds (or finds cached) and starts the cluster; it is
// torn down when the test ends, after the pods' state and logs are
// printed if the test failed.
func newKubeCluster(t *testing.T, ctx context.Context) *kubeCluster {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	k := &kubeCluster{t: t, root: root}
	// What an earlier run left behind (a killed test binary) goes first.
	k.script(ctx, "down")
	k.bin = lastLine(k.script(ctx, "build"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if t.Failed() && k.kubeconfig != "" {
			out, _ := k.try(ctx, "kubectl", "get", "pods", "-A", "-o", "wide")
			t.Logf("kubectl get pods:\n%s", out)
			out, _ = k.try(ctx, "kubectl", "get", "events", "--sort-by=.lastTimestamp")
			t.Logf("kubectl get events:\n%s", tailLines(out, 40))
			out, _ = k.try(ctx, "kubectl", "logs", "-l", "app.kubernetes.io/instance="+helmRelease,
				"--all-containers", "--prefix", "--tail", "20")
			t.Logf("kubectl logs --tail 20:\n%s", out)
		}
		if os.Getenv(EnvHelmKeep) != "" {
			t.Logf("cluster kept ($%s): KUBECONFIG=%s; scripts/k8s-local.sh down removes it", EnvHelmKeep, k.kubeconfig)
			return
		}
		k.script(ctx, "down")
	})
	start := time.Now()
	k.kubeconfig = lastLine(k.script(ctx, "up"))
	t.Logf("node Ready %s after k8s-local.sh up", time.Since(start).Round(time.Second))
	return k
}

// script runs scripts/k8s-local.sh with args and returns its stdout; its
// progress goes to the test log.
func (k *kubeCluster) script(ctx context.Context, args ...string) string {
	k.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(k.root, "scripts", "k8s-local.sh"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		k.t.Logf("k8s-local.sh %s:\n%s", args[0], s)
	}
	if err != nil {
		k.t.Fatalf("k8s-local.sh %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String()
}

// try runs a cluster command (kubectl, helm) in the test's namespace.
func (k *kubeCluster) try(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(k.bin, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig, "HELM_NAMESPACE="+helmNamespace)
	if name == "kubectl" {
		cmd.Args = append([]string{cmd.Path, "--namespace", helmNamespace}, args...)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run is try that fails the test on an error.
func (k *kubeCluster) run(ctx context.Context, name string, args ...string) string {
	k.t.Helper()
	out, err := k.try(ctx, name, args...)
	if err != nil {
		k.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// kubePod is what TestHelm reads of a pod.
type kubePod struct {
	Metadata struct {
		Name              string  `json:"name"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// allReady waits until every pod of the namespace is Ready and none is
// on its way out.
func (k *kubeCluster) allReady(ctx context.Context, timeout time.Duration) {
	k.t.Helper()
	kittest.Eventually(k.t, timeout, func() error {
		out, err := k.try(ctx, "kubectl", "get", "pods", "-o", "json")
		if err != nil {
			return fmt.Errorf("kubectl get pods: %w: %s", err, out)
		}
		var list struct{ Items []kubePod }
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return err
		}
		var notReady []string
		for _, p := range list.Items {
			ready := p.Metadata.DeletionTimestamp == nil
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status != "True" {
					ready = false
				}
			}
			if !ready {
				notReady = append(notReady, p.Metadata.Name+" ("+p.Status.Phase+")")
			}
		}
		return kittest.Check(len(list.Items) > 0 && len(notReady) == 0, "%d pods, not Ready: %v", len(list.Items), notReady)
	})
}

// clusterIP is the ClusterIP of the Service name.
func (k *kubeCluster) clusterIP(ctx context.Context, name string) string {
	k.t.Helper()
	return strings.TrimSpace(k.run(ctx, "kubectl", "get", "service", name, "-o", "jsonpath={.spec.clusterIP}"))
}

// bus connects to the release's NATS through its Service.
func (k *kubeCluster) bus(ctx context.Context) *bus.Conn {
	k.t.Helper()
	url := "nats://" + k.clusterIP(ctx, helmRelease+"-nats") + ":4222"
	nc, err := nats.Connect(url, nats.Name("sovereign-e2e-helm"), nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond))
	if err != nil {
		k.t.Fatalf("NATS at %s: %v", url, err)
	}
	k.t.Cleanup(nc.Close)
	bc, err := bus.New(nc, "")
	if err != nil {
		k.t.Fatal(err)
	}
	return bc
}
