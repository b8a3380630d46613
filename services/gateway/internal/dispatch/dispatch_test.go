package dispatch_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
)

// records keeps the audit records it is given.
type records struct {
	mu   sync.Mutex
	list []audit.Record
}

func (r *records) Publish(rec audit.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func entry(name string, h dispatch.Handler) dispatch.Entry {
	return dispatch.Entry{Kind: dispatch.Browser, Tool: dispatch.Tool{Name: name}, Handler: h}
}

func TestChainOrder(t *testing.T) {
	t.Parallel()
	var trace []string
	mw := func(name string) dispatch.Middleware {
		return func(next dispatch.Handler) dispatch.Handler {
			return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
				trace = append(trace, name+">")
				r := next(ctx, c)
				trace = append(trace, "<"+name)
				return r
			}
		}
	}
	h := dispatch.Chain(func(context.Context, *dispatch.Call) *dispatch.Result {
		trace = append(trace, "handler")
		return dispatch.Text("ok")
	}, mw("a"), mw("b"))
	h(context.Background(), &dispatch.Call{})
	if got, want := strings.Join(trace, " "), "a> b> handler <b <a"; got != want {
		t.Fatalf("Chain ran %q, want %q", got, want)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := dispatch.NewRegistry()
	ok := func(context.Context, *dispatch.Call) *dispatch.Result { return dispatch.Text("ok") }
	reg.Add(entry("b", ok))
	reg.Add(entry("a", ok))
	reg.Add(entry("c", ok))
	reg.Add(entry("a", func(context.Context, *dispatch.Call) *dispatch.Result { return dispatch.Text("new a") })) // replaces, keeps its place
	reg.Remove("c", "unknown")
	var names []string
	for _, e := range reg.Entries() {
		names = append(names, e.Tool.Name)
	}
	if got, want := strings.Join(names, ","), "b,a"; got != want {
		t.Errorf("Entries() = %s, want %s", got, want)
	}
	if got := reg.Dispatch(context.Background(), &dispatch.Call{Tool: "a"}).TextContent(); got != "new a" {
		t.Errorf("Dispatch(a) = %q, want the replacing handler's", got)
	}
	res := reg.Dispatch(context.Background(), &dispatch.Call{Tool: "c"})
	if !res.IsError || !strings.Contains(res.TextContent(), `unknown tool "c"`) {
		t.Errorf("Dispatch(removed tool) = %+v, want an unknown-tool error", res)
	}
}

// TestDefaultProgress: a handler always has a Progress; a call whose
// transport gave none gets NoProgress, whose reports go nowhere.
func TestDefaultProgress(t *testing.T) {
	reg := dispatch.NewRegistry()
	reg.Add(entry("p", func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		if c.Progress != dispatch.NoProgress {
			return dispatch.Errorf("progress %T", c.Progress)
		}
		if err := c.Progress.Report(ctx, 1, 2, "half"); err != nil {
			return dispatch.Errorf("report: %v", err)
		}
		return dispatch.Text("ok")
	}))
	if res := reg.Dispatch(context.Background(), &dispatch.Call{Tool: "p"}); res.IsError {
		t.Fatalf("Dispatch(call without progress) = %q, want NoProgress", res.TextContent())
	}
}

func TestRecover(t *testing.T) {
	t.Parallel()
	reg := dispatch.NewRegistry(dispatch.Recover(quiet))
	reg.Add(entry("boom", func(context.Context, *dispatch.Call) *dispatch.Result { panic("kaput") }))
	res := reg.Dispatch(context.Background(), &dispatch.Call{Tool: "boom"})
	if !res.IsError || res.TextContent() != "boom: internal error: kaput" {
		t.Fatalf("a panicking handler gave %+v, want an internal error result", res)
	}
}

// TestAuditFacts: the record takes its facts from the result the handler
// returned (browser session, hidden arguments, outcome), never the handle.
func TestAuditFacts(t *testing.T) {
	t.Parallel()
	pub := &records{}
	reg := dispatch.NewRegistry(dispatch.Audit(pub, quiet))
	reg.Add(entry("fill", func(context.Context, *dispatch.Call) *dispatch.Result {
		r := dispatch.Denied("fill: refused by policy")
		r.BrowserSession, r.Hide, r.Session = "s-1", []string{"value"}, "sov_secret_handle"
		return r
	}))
	reg.Add(entry("ask", func(context.Context, *dispatch.Call) *dispatch.Result {
		return &dispatch.Result{Input: &dispatch.InputRequest{}}
	}))
	reg.Add(entry("shot", func(context.Context, *dispatch.Call) *dispatch.Result {
		return &dispatch.Result{Parts: []dispatch.Part{{Text: "Screenshot"}, {Data: make([]byte, 1234), MIME: "image/png"}}}
	}))
	c := &dispatch.Call{Tool: "fill", Caller: dispatch.Caller{ID: "token:t1", Name: "ci"}, Client: "claude-code 1.0", MCPSession: "m-1",
		Args: map[string]any{"ref": "e1", "value": "hunter2", "session": "sov_secret_handle"}}
	reg.Dispatch(context.Background(), c)
	reg.Dispatch(context.Background(), &dispatch.Call{Tool: "ask"})
	reg.Dispatch(context.Background(), &dispatch.Call{Tool: "shot"})
	if len(pub.list) != 2 {
		t.Fatalf("%d records, want 2 (an input request is not recorded)", len(pub.list))
	}
	r := pub.list[0]
	if r.Outcome != historyv1.Outcome_OUTCOME_DENIED || r.BrowserSession != "s-1" || r.Caller != "ci" || r.Client != "claude-code 1.0" ||
		r.MCPSession != "m-1" || len(r.HideArguments) != 1 || r.Result != "fill: refused by policy" {
		t.Errorf("record = %+v", r)
	}
	if strings.Contains(string(r.Arguments), "sov_secret_handle") {
		t.Errorf("the record's arguments %s hold the session handle", r.Arguments)
	}
	if got := pub.list[1].Result; got != "Screenshot\n[image image/png, 1234 bytes]" {
		t.Errorf("image result recorded as %q", got)
	}
}

func TestAuditArgumentsClipped(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", dispatch.MaxAuditArgument) // 2 bytes each
	got := string(dispatch.AuditArguments(map[string]any{"content": big}))
	if len(got) > dispatch.MaxAuditArgument+200 || !strings.Contains(got, "bytes, clipped for the audit trail") {
		t.Fatalf("AuditArguments of a %d-byte string gave %d bytes: %.80s…", len(big), len(got), got)
	}
}

// BenchmarkDispatch is the dispatcher's own cost per call: the registry
// lookup, recover, audit (record built and handed to a publisher) and a
// pass-through approval, around a handler that answers at once.
func BenchmarkDispatch(b *testing.B) {
	pass := func(next dispatch.Handler) dispatch.Handler { return next }
	reg := dispatch.NewRegistry(dispatch.Recover(quiet), dispatch.Audit(discard{}, quiet), pass)
	reg.Add(entry("get_title", func(context.Context, *dispatch.Call) *dispatch.Result {
		return &dispatch.Result{Parts: []dispatch.Part{{Text: "Example Domain"}}, BrowserSession: "s-1"}
	}))
	ctx := context.Background()
	args := map[string]any{"session": "sov_x"}
	b.ReportAllocs()
	for b.Loop() {
		reg.Dispatch(ctx, &dispatch.Call{Tool: "get_title", Args: args, Caller: dispatch.Caller{ID: "anonymous", Name: "anonymous"}})
	}
}

type discard struct{}

func (discard) Publish(audit.Record) {}
