package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadyz(t *testing.T) {
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
