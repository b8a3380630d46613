package bus_test

import (
	"context"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var echo = bus.Endpoint[*browserv1.Open, *browserv1.Open]{Group: []string{"test", "grp"}, Name: "echo"}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	c := start(t)
	if got, want := echo.Subject(c), c.Subject("test", "grp", "echo"); got != want {
		t.Errorf("Subject() = %q, want %q", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.Serving(ctx, echo.Subject(c)) {
		t.Error("Serving() before the endpoint is served = true, want false")
	}
	svc, err := c.AddService("endpoint", "0.0.1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	g := svc.AddGroup(c.Subject(echo.Group...))
	if err := g.AddEndpoint(echo.Name, bus.Handle(c, func(_ context.Context, req *browserv1.Open) (*browserv1.Open, error) {
		return &browserv1.Open{Url: req.GetUrl()}, nil
	})); err != nil {
		t.Fatal(err)
	}
	res, err := echo.Call(ctx, c, &browserv1.Open{Url: "https://example.test"})
	if err != nil || res.GetUrl() != "https://example.test" {
		t.Fatalf("Call() = %v, %v; want the URL echoed", res, err)
	}
	if !c.Serving(ctx, echo.Subject(c)) {
		t.Error("Serving() = false, want true")
	}
}
