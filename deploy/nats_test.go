package deploy

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSConfig starts a real nats-server from nats.conf (the file compose
// mounts), only with the store moved to a temp dir and free ports, and
// checks what Sovereign relies on: JetStream on, the 1 MiB max payload the
// bus sizes its parts from, room for the audit stream, and the monitoring
// endpoint compose's healthcheck asks.
func TestNATSConfig(t *testing.T) {
	opts, err := server.ProcessConfigFile("nats.conf")
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if !opts.JetStream || opts.StoreDir != "/data" {
		t.Errorf("jetstream %v, store_dir %q: want JetStream on the /data volume", opts.JetStream, opts.StoreDir)
	}
	if opts.MaxPayload != 1<<20 {
		t.Errorf("max_payload = %d, want 1 MiB", opts.MaxPayload)
	}
	if opts.JetStreamMaxStore < 1<<30 {
		t.Errorf("max_file_store = %d: the audit stream alone may hold 256 MiB", opts.JetStreamMaxStore)
	}
	if opts.Port != 4222 || opts.HTTPPort != 8222 {
		t.Errorf("ports %d, %d; compose.yaml expects 4222 and 8222", opts.Port, opts.HTTPPort)
	}

	opts.StoreDir = t.TempDir()
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	if !s.JetStreamEnabled() {
		t.Fatal("JetStream is off")
	}
	resp, err := http.Get("http://" + s.MonitorAddr().String() + "/healthz?js-enabled-only=true")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthcheck URL: %s %s", resp.Status, body)
	}
}
