package natsrv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamUnderDataDir: the embedded server keeps JetStream under the
// data dir, and a second server on a taken port fails with a clear error.
func TestJetStreamUnderDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Start(Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "probe"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Fatalf("no JetStream store under the data dir: %v", err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	if _, err := Start(Options{Listen: addr, DataDir: t.TempDir()}); err == nil {
		t.Fatalf("a second server on %s started", addr)
	}
}

func TestBadListen(t *testing.T) {
	t.Parallel()
	if _, err := Start(Options{Listen: "no-port"}); err == nil || !strings.Contains(err.Error(), "no-port") {
		t.Fatalf("Start(no-port) = %v, want an error naming it", err)
	}
}
