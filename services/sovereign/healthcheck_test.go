package sovereign

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"nats":"NATS connection is RECONNECTING"}`))
			return
		}
		_, _ = w.Write([]byte(`{"nats":"ok"}`))
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := healthcheck(context.Background(), []string{srv.URL + "/readyz"}, &out); err != nil || !strings.Contains(out.String(), `"nats":"ok"`) {
		t.Fatalf("ready: %v %q", err, out.String())
	}
	ready = false
	err := healthcheck(context.Background(), []string{srv.URL + "/readyz"}, &out)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "RECONNECTING") {
		t.Fatalf("not ready: %v", err)
	}
	for _, args := range [][]string{nil, {"ftp://x/readyz"}, {"a", "b"}} {
		if err := healthcheck(context.Background(), args, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if err := healthcheck(context.Background(), []string{"http://127.0.0.1:1/readyz"}, &out); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("refused: %v", err)
	}
}
