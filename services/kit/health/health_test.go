package health

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
)

func TestReadyz(t *testing.T) {
	t.Parallel()
	var failing error
	mux := http.NewServeMux()
	Register(mux, Check{Name: "nats", Func: func(context.Context) error { return failing }})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"nats":"ok"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	failing = errors.New("not connected")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"nats":"not connected"`) {
		t.Errorf("/readyz with a failing check = %d %s, want 503 naming it", code, body)
	}
}

// TestServe serves the three endpoints on a real listener: /readyz follows
// a real NATS connection (503 naming nats while the server is down).
func TestServe(t *testing.T) {
	t.Parallel()
	srv, err := natsrv.Start(natsrv.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
		}
	})
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, "127.0.0.1:0", NATS(nc))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"nats":"ok"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, without go_goroutines:\n%.500s", code, body)
	}

	srv.Stop()
	stopped = true
	kittest.Eventually(t, 30*time.Second, func() error {
		code, body := get("/readyz")
		return kittest.Check(code == 503 && strings.Contains(body, `"nats":"NATS connection is`), "/readyz with NATS down = %d %s, want 503 naming nats", code, body)
	})

	cancel()
	kittest.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return nil // closed with its context
		}
		resp.Body.Close()
		return errors.New("the listener still answers after its context ended")
	})
}
