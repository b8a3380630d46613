package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// start runs an in-process NATS server and returns a bus on it.
func start(t *testing.T) *bus.Conn {
	t.Helper()
	return natstest.Bus(t, natstest.Server(t))
}

func TestRequestReply(t *testing.T) {
	t.Parallel()
	c := start(t)
	svc, err := c.AddService("test", "0.0.1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	big := strings.Repeat("x", 3<<20+12345) // three and a bit times the 1 MiB payload limit
	err = svc.AddEndpoint("echo", bus.Handle(c, func(ctx context.Context, req *browserv1.Open) (*browserv1.Open, error) {
		switch req.Url {
		case "big":
			return &browserv1.Open{Url: big}, nil
		case "fail":
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "ref e9 is not in the current page")
		case "panic":
			panic("boom")
		case "huge error":
			return nil, bus.Errorf(commonv1.ErrorCode_SCRIPT_ERROR, "%s", strings.Repeat("y", 3<<20))
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &browserv1.Open{Url: req.Url}, nil
	}), endpointSubject("sov.test.echo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	tests := []struct {
		name     string
		url      string
		timeout  time.Duration
		want     string
		wantCode commonv1.ErrorCode
		wantMsg  string
	}{
		{name: "small", url: "hello", want: "hello"},
		{name: "chunked", url: "big", want: big},
		{name: "coded error", url: "fail", wantCode: commonv1.ErrorCode_NOT_FOUND, wantMsg: "ref e9 is not in the current page"},
		{name: "panic", url: "panic", wantCode: commonv1.ErrorCode_INTERNAL, wantMsg: "boom"},
		// An error message above the payload limit is cut, not lost.
		{name: "huge error", url: "huge error", timeout: 10 * time.Second, wantCode: commonv1.ErrorCode_SCRIPT_ERROR, wantMsg: "more bytes)"},
		{name: "deadline", url: "slow", timeout: 200 * time.Millisecond, wantCode: commonv1.ErrorCode_TIMEOUT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctx
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			var res browserv1.Open
			err := c.Request(ctx, "sov.test.echo", &browserv1.Open{Url: tt.url}, &res)
			if tt.wantCode != commonv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
				if got := bus.CodeOf(err); got != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("Request(%q) error = %v (%v), want %v containing %q", tt.url, err, got, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Request(%q) = %v", tt.url, err)
			}
			if res.Url != tt.want {
				t.Fatalf("Request(%q) returned %d bytes, want %d", tt.url, len(res.Url), len(tt.want))
			}
		})
	}
}

func TestNoResponders(t *testing.T) {
	t.Parallel()
	c := start(t)
	start := time.Now()
	var res browserv1.Open
	err := c.Request(context.Background(), "sov.nobody.home", &browserv1.NoArgs{}, &res)
	if bus.CodeOf(err) != commonv1.ErrorCode_UNAVAILABLE {
		t.Fatalf("Request to nobody = %v, want UNAVAILABLE", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("no-responders took %s; it must not wait for the deadline", d)
	}
}

// TestLiveness: a server that disappears mid-request is noticed through its
// ping subject long before the request's deadline.
func TestLiveness(t *testing.T) {
	t.Parallel()
	c := start(t)
	pingSub, err := c.NATS().Subscribe("sov.test.ping", func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	_, err = c.NATS().Subscribe("sov.test.work", func(m *nats.Msg) {
		// Never answer; "die" shortly after taking the request.
		once.Do(func() { time.AfterFunc(300*time.Millisecond, func() { _ = pingSub.Unsubscribe() }) })
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res browserv1.Open
	err = c.Request(ctx, "sov.test.work", &browserv1.NoArgs{}, &res, bus.WithLiveness("sov.test.ping", 200*time.Millisecond))
	if bus.CodeOf(err) != commonv1.ErrorCode_UNAVAILABLE || !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("Request = %v, want UNAVAILABLE stopped answering", err)
	}
	if ctx.Err() != nil {
		t.Fatal("liveness did not fire before the deadline")
	}
}

// TestTracePropagation: one request is one trace with a client span and a
// server span that is its child.
func TestTracePropagation(t *testing.T) {
	rec, tp := recordSpans(t)
	c := start(t)
	svc, err := c.AddService("trace", "0.0.1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	var seen nats.Header
	var mu sync.Mutex
	_ = svc.AddEndpoint("t", bus.Handle(c, func(ctx context.Context, req *browserv1.NoArgs) (*browserv1.NoArgs, error) {
		return &browserv1.NoArgs{}, nil
	}), endpointSubject("sov.trace.t"))
	_, _ = c.NATS().Subscribe("sov.trace.t", func(m *nats.Msg) { mu.Lock(); seen = m.Header; mu.Unlock() })
	if err := c.Request(context.Background(), "sov.trace.t", &browserv1.NoArgs{}, &browserv1.NoArgs{}); err != nil {
		t.Fatal(err)
	}
	_ = tp.ForceFlush(context.Background())
	kittest.Eventually(t, 30*time.Second, func() error {
		n := len(rec.Ended())
		return kittest.Check(n >= 2, "got %d spans, want client and server", n)
	})
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want client and server", len(spans))
	}
	if spans[0].SpanContext().TraceID() != spans[1].SpanContext().TraceID() {
		t.Fatal("client and server spans are in different traces")
	}
	client, server := spans[0], spans[1]
	if client.SpanKind() != trace.SpanKindClient {
		client, server = server, client
	}
	if client.SpanKind() != trace.SpanKindClient || server.SpanKind() != trace.SpanKindServer {
		t.Fatalf("span kinds %v and %v, want client and server", client.SpanKind(), server.SpanKind())
	}
	if server.Parent().SpanID() != client.SpanContext().SpanID() {
		t.Error("the server span is not a child of the client span")
	}
	// OpenTelemetry's messaging conventions.
	for _, tt := range []struct {
		span       sdktrace.ReadOnlySpan
		key, value string
	}{
		{client, "messaging.system", "nats"},
		{client, "messaging.destination.name", "sov.trace.t"},
		{client, "messaging.operation.type", "send"},
		{client, "messaging.message.body.size", "0"},
		{server, "messaging.system", "nats"},
		{server, "messaging.destination.name", "sov.trace.t"},
		{server, "messaging.operation.type", "process"},
		{server, "messaging.message.body.size", "0"},
	} {
		if got := spanAttr(tt.span, tt.key); got != tt.value {
			t.Errorf("%v span %s = %q, want %q", tt.span.SpanKind(), tt.key, got, tt.value)
		}
	}
	// The observer's copy of the request arrives on its own goroutine.
	kittest.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		_, ok := seen["traceparent"]
		return kittest.Check(ok, "headers %v lack a lower-case traceparent", seen)
	})
}

// TestTraceOfFailure: a failed request's spans say its code, not its
// message (which may quote a page or what the caller sent).
func TestTraceOfFailure(t *testing.T) {
	rec, _ := recordSpans(t)
	c := start(t)
	svc, err := c.AddService("fail", "0.0.1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	const secret = "password=hunter2"
	_ = svc.AddEndpoint("f", bus.Handle(c, func(ctx context.Context, req *browserv1.NoArgs) (*browserv1.NoArgs, error) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no element %s", secret)
	}), endpointSubject("sov.fail.f"))
	err = c.Request(context.Background(), "sov.fail.f", &browserv1.NoArgs{}, &browserv1.NoArgs{})
	if bus.CodeOf(err) != commonv1.ErrorCode_NOT_FOUND {
		t.Fatalf("Request = %v, want NOT_FOUND", err)
	}
	kittest.Eventually(t, 30*time.Second, func() error {
		n := len(rec.Ended())
		return kittest.Check(n >= 2, "got %d spans, want client and server", n)
	})
	if n := len(rec.Ended()); n != 2 {
		t.Fatalf("got %d spans, want client and server", n)
	}
	for _, s := range rec.Ended() {
		if s.Status().Code != codes.Error || spanAttr(s, "error.type") != "NOT_FOUND" {
			t.Errorf("%v span: status %v, error.type %q; want Error and NOT_FOUND", s.SpanKind(), s.Status(), spanAttr(s, "error.type"))
		}
		if strings.Contains(fmt.Sprint(s.Status(), s.Attributes(), s.Events()), secret) {
			t.Errorf("%v span carries the error message: %v %v %v", s.SpanKind(), s.Status(), s.Attributes(), s.Events())
		}
	}
}

var globalTP = sync.OnceValue(func() *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp
})

// recordSpans records the spans ended during the test. The global tracer
// provider is installed once: tracers follow only the first one ever set.
// A test that calls it is not parallel: the recorder sees the spans of
// every test that runs meanwhile.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	tp := globalTP()
	rec := tracetest.NewSpanRecorder()
	tp.RegisterSpanProcessor(rec)
	t.Cleanup(func() { tp.UnregisterSpanProcessor(rec) })
	return rec, tp
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func endpointSubject(s string) endpointOpt { return micro.WithEndpointSubject(s) }

type endpointOpt = micro.EndpointOpt

// TestCancelReachesServer: a caller that cancels stops the handler's work.
func TestCancelReachesServer(t *testing.T) {
	t.Parallel()
	c := start(t)
	stopped := slowEndpoint(t, c, "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	err := c.Request(ctx, "sov.cancel.slow", &browserv1.NoArgs{}, &browserv1.NoArgs{})
	if bus.CodeOf(err) != commonv1.ErrorCode_UNAVAILABLE || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("Request = %v, want cancelled", err)
	}
	wantCancelled(t, stopped, "the handler kept running after its caller cancelled")
}

// slowEndpoint serves sov.<service>.slow on c: a handler that runs until
// its context ends and then sends why on the returned channel.
func slowEndpoint(t *testing.T, c *bus.Conn, service string) <-chan error {
	t.Helper()
	svc, err := c.AddService(service, "0.0.1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	stopped := make(chan error, 1)
	err = svc.AddEndpoint("slow", bus.Handle(c, func(ctx context.Context, req *browserv1.NoArgs) (*browserv1.NoArgs, error) {
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	}), endpointSubject("sov."+service+".slow"))
	if err != nil {
		t.Fatal(err)
	}
	return stopped
}

// wantCancelled fails the test unless the handler behind stopped ends,
// cancelled, within 10 s.
func wantCancelled(t *testing.T, stopped <-chan error, otherwise string) {
	t.Helper()
	select {
	case err := <-stopped:
		if err != context.Canceled {
			t.Fatalf("handler context ended with %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(otherwise)
	}
}

// TestCancelBeforeHandler: a cancel that reaches the server before the
// handler of its request has started (they come on different
// subscriptions, so a loaded machine may take them in either order) still
// stops that handler.
func TestCancelBeforeHandler(t *testing.T) {
	t.Parallel()
	c := start(t)
	stopped := slowEndpoint(t, c, "early")
	reply := c.NATS().NewInbox()
	if err := c.NATS().Publish(c.Subject("cancel"), []byte(reply)); err != nil {
		t.Fatal(err)
	}
	if err := c.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	// Once a later cancel is back, the server has delivered the first one
	// to c too: it comes before the request (the test fails the same
	// either way if the product is wrong; this makes the order likely).
	seen := make(chan struct{})
	sub, err := c.NATS().Subscribe(c.Subject("cancel"), func(m *nats.Msg) {
		if string(m.Data) == "marker" {
			close(seen)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NATS().Publish(c.Subject("cancel"), []byte("marker")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the marker cancel did not arrive")
	}
	msg := nats.NewMsg("sov.early.slow")
	msg.Reply = reply
	msg.Header.Set(bus.HeaderTimeout, "60000")
	if err := c.NATS().PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	wantCancelled(t, stopped, "the handler kept running: the cancel that came first was lost")
}

// TestDisconnected: a request waiting when the connection to NATS goes
// away fails at once, with ErrDisconnected in its chain, and so does a new
// one; neither waits for its deadline.
func TestDisconnected(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	taken := make(chan struct{}, 1)
	if _, err := c.NATS().Subscribe("sov.test.hang", func(*nats.Msg) { taken <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		var res browserv1.Open
		errc <- c.Request(ctx, "sov.test.hang", &browserv1.NoArgs{}, &res)
	}()
	<-taken
	srv.Stop()
	select {
	case err := <-errc:
		if !errors.Is(err, bus.ErrDisconnected) || bus.CodeOf(err) != commonv1.ErrorCode_UNAVAILABLE {
			t.Fatalf("Request waiting when NATS stopped = %v, want UNAVAILABLE with ErrDisconnected", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Request waiting when NATS stopped did not fail before its deadline")
	}
	var res browserv1.Open
	if err := c.Request(ctx, "sov.test.hang", &browserv1.NoArgs{}, &res); !errors.Is(err, bus.ErrDisconnected) {
		t.Fatalf("Request while NATS is down = %v, want ErrDisconnected at once", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the requests waited for their deadline")
	}
}

// TestReconnected: once NATS is back, requests work again (the down state
// ends with the reconnect).
func TestReconnected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.Listening(t, dir)
	nc := natstest.Reconnecting(t, srv.URL())
	c, err := bus.New(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	serve := func() {
		if _, err := nc.Subscribe("sov.test.ok", func(m *nats.Msg) {
			b, _ := proto.Marshal(&browserv1.Open{Url: "ok"})
			_ = m.Respond(b)
		}); err != nil {
			t.Fatal(err)
		}
	}
	serve()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res browserv1.Open
	kittest.Eventually(t, 30*time.Second, func() error { return kittest.Check(!nc.IsConnected(), "still connected after NATS stopped") })
	if err := c.Request(ctx, "sov.test.ok", &browserv1.NoArgs{}, &res); !errors.Is(err, bus.ErrDisconnected) {
		t.Fatalf("Request while NATS is down = %v, want ErrDisconnected", err)
	}
	srv.Start(dir)
	kittest.Eventually(t, 30*time.Second, func() error {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		if err := c.Request(rctx, "sov.test.ok", &browserv1.NoArgs{}, &res); err != nil {
			return fmt.Errorf("no request has worked since NATS is back: %w", err)
		}
		return nil
	})
}
