package identity

import (
	"context"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
)

// TestExposedHost: which listen hosts reach beyond this machine.
func TestExposedHost(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "0.0.0.0": true, "::": true, "192.168.1.5": true, "mcp.example.com": true,
		"127.0.0.1": false, "[::1]": false, "localhost": false, "LOCALHOST": false,
	} {
		if got := exposedHost(host); got != want {
			t.Errorf("exposedHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestCallerInContext: a request's caller travels in its context, and a
// context without one is anonymous.
func TestCallerInContext(t *testing.T) {
	if got := From(context.Background()); got.Kind != KindAnonymous || got.ID != Anonymous {
		t.Errorf("From(no caller) = %+v, want anonymous", got)
	}
	c := dispatch.Caller{Kind: KindToken, ID: "token:t1", Name: "ci"}
	if got := From(With(context.Background(), c)); got.ID != c.ID || got.Name != c.Name {
		t.Errorf("From(With(%+v)) = %+v", c, got)
	}
}
