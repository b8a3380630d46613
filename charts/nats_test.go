package charts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestNATSConfig loads the rendered nats.conf with nats-server's own
// config parser, as each pod of the StatefulSet would.
func TestNATSConfig(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		overrides map[string]any
		replicas  int
		maxStore  int64
	}{
		{name: "default", replicas: 3, maxStore: 9 << 30},
		{name: "nats-cluster", file: valuesFile("nats-cluster-values.yaml"), replicas: 3, maxStore: 18 << 30},
		{name: "single-server", overrides: map[string]any{"nats": map[string]any{"cluster": map[string]any{"replicas": 1}}}, replicas: 1, maxStore: 9 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, readValues(t, tt.file, tt.overrides))
			cm := find[*corev1.ConfigMap](t, m, fullname+"-nats-config")
			ss := find[*appsv1.StatefulSet](t, m, fullname+"-nats")
			if int(*ss.Spec.Replicas) != tt.replicas {
				t.Errorf("StatefulSet replicas = %d, want %d", *ss.Spec.Replicas, tt.replicas)
			}
			path := filepath.Join(t.TempDir(), "nats.conf")
			if err := os.WriteFile(path, []byte(cm.Data["nats.conf"]), 0o600); err != nil {
				t.Fatal(err)
			}
			// The StatefulSet sets SERVER_NAME to the pod's name.
			pod := fullname + "-nats-1"
			t.Setenv("SERVER_NAME", pod)
			opts, err := server.ProcessConfigFile(path)
			if err != nil {
				t.Fatalf("nats-server rejects the rendered nats.conf: %v\n%s", err, cm.Data["nats.conf"])
			}
			if opts.ServerName != pod || opts.Port != 4222 || opts.HTTPPort != 8222 {
				t.Errorf("server_name %q, port %d, http_port %d", opts.ServerName, opts.Port, opts.HTTPPort)
			}
			if !opts.JetStream || opts.StoreDir != "/data" || opts.JetStreamMaxStore != tt.maxStore {
				t.Errorf("jetstream %v, store_dir %q, max_file_store %d; want on, /data, %d", opts.JetStream, opts.StoreDir, opts.JetStreamMaxStore, tt.maxStore)
			}
			if opts.PidFile != "/tmp/nats.pid" {
				t.Errorf("pid_file = %q: the preStop lame-duck signal needs /tmp/nats.pid", opts.PidFile)
			}
			if aff := ss.Spec.Template.Spec.Affinity; tt.replicas > 1 && (aff == nil || aff.PodAntiAffinity == nil) {
				t.Error("the NATS servers are not spread over nodes")
			}
			// The pid file and the store are on writable volumes.
			mounts := map[string]bool{}
			for _, vm := range ss.Spec.Template.Spec.Containers[0].VolumeMounts {
				mounts[vm.MountPath] = !vm.ReadOnly
			}
			if !mounts["/tmp"] || !mounts["/data"] {
				t.Errorf("nats mounts %v: /tmp and /data must be writable", mounts)
			}
			if tt.replicas == 1 {
				if opts.Cluster.Port != 0 || len(opts.Routes) != 0 {
					t.Errorf("a single server has cluster port %d and %d routes", opts.Cluster.Port, len(opts.Routes))
				}
				return
			}
			if opts.Cluster.Name != fullname+"-nats" || opts.Cluster.Port != 6222 || len(opts.Routes) != tt.replicas {
				t.Fatalf("cluster %q port %d with %d routes", opts.Cluster.Name, opts.Cluster.Port, len(opts.Routes))
			}
			// Every route names a pod of the StatefulSet through its headless Service.
			for i, r := range opts.Routes {
				want := fullname + "-nats-" + string(rune('0'+i)) + "." + ss.Spec.ServiceName + "." + namespace + ".svc"
				if r.Hostname() != want || r.Port() != "6222" {
					t.Errorf("route %d = %s, want %s:6222", i, r, want)
				}
			}
		})
	}
}
