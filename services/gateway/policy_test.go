package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
)

// TestURLPolicyThroughGateway: the gateway's global rules reach the
// worker; a blocked navigation is a tool error naming the rule; a URL
// refused only for want of an allow rule waits for a person, who can let
// the session go there once or for the session, or refuse it.
func TestURLPolicyThroughGateway(t *testing.T) {
	t.Parallel()
	needChromium(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>%s</title>`, r.Host)
	}))
	defer site.Close()
	port := site.URL[strings.LastIndex(site.URL, ":")+1:]
	at := func(host string) string { return "http://" + host + ":" + port + "/" }

	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	// Loopback stands in for the internet here: private blocking is off,
	// and only 127.0.0.1 is on the allow list.
	url := startGateway(t, srv, gateway.Config{PolicyConfig: gateway.PolicyConfig{AllowPrivate: true, URLAllow: []string{"127.0.0.1"}, URLBlock: []string{"127.0.0.3"}}})
	q := console(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := elicitingClient(t, url, false, nil) // 2025, no elicitation: the console decides
	if res := callTool(t, c, "open", map[string]any{"url": at("127.0.0.1")}); res.IsError {
		t.Fatalf("allowed page: %s", text(res))
	}
	res := callTool(t, c, "open", map[string]any{"url": at("127.0.0.3")})
	if !res.IsError || !strings.Contains(text(res), `block rule "127.0.0.3" (global)`) {
		t.Fatalf("blocked page: %v %q", res.IsError, text(res))
	}

	// Only an exact host can be granted: "*" would lift the allow list.
	if res := callTool(t, c, "open", map[string]any{"url": "http://*/"}); !res.IsError {
		t.Fatalf("open http://*/ went through: %q", text(res))
	}

	// Refused once by a person.
	call := toolCall(t, c, "open", map[string]any{"url": at("127.0.0.2")})
	p := pendingOf(t, watch)
	if p.Tool != "open" || p.Grant != "url:127.0.0.2" || !strings.Contains(p.Reason, "not in the allow list of the global tier") {
		t.Errorf("the console sees %+v", p)
	}
	if _, err := q.Decide(ctx, p.ID, false, "", "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); !res.IsError || !strings.Contains(text(res), "denied by console:admin") {
		t.Fatalf("denied navigation: %v %q", res.IsError, text(res))
	}

	// Allowed once: this navigation goes through, the next one asks again.
	call = toolCall(t, c, "open", map[string]any{"url": at("localhost")})
	p = pendingOf(t, watch)
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); res.IsError || !strings.Contains(text(callTool(t, c, "get_title", nil)), "localhost") {
		t.Fatalf("navigation approved once: %v %q", res.IsError, text(res))
	}
	// Approved for the session: later navigations there need nobody.
	call = toolCall(t, c, "open", map[string]any{"url": at("localhost") + "again"})
	p = pendingOf(t, watch)
	if _, err := q.Decide(ctx, p.ID, true, approval.Session, "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); res.IsError {
		t.Fatalf("navigation approved for the session: %q", text(res))
	}
	for _, step := range []string{"reload", "open"} {
		args := map[string]any{}
		if step == "open" {
			args["url"] = at("localhost") + "third"
		}
		if res := callTool(t, c, step, args); res.IsError {
			t.Fatalf("%s after a session grant: %q", step, text(res))
		}
	}
	// The grant belongs to this session only, and the calling client never
	// grants a URL itself: its elicitation is not asked, the console is.
	e := &elicitor{}
	e.decide("approve_session")
	other := elicitingClient(t, url, false, e)
	call = toolCall(t, other, "open", map[string]any{"url": at("localhost")})
	p = pendingOf(t, watch)
	if e.count() != 0 {
		t.Errorf("the client was asked to grant a URL %d times", e.count())
	}
	if _, err := q.Decide(ctx, p.ID, false, "", "console:admin", ""); err != nil {
		t.Fatal(err)
	}
	if res := await(t, call); !res.IsError {
		t.Fatal("another session used the first one's grant")
	}
}

// TestPolicyFile: the file's rules load, and a typo or a bad pattern is an
// error naming the file.
func TestPolicyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.yaml", "urls:\n  allow: ['*.example.com']\n  block: [evil.example.com]\n  block_private: false\napprovals:\n  tools: [eval]\n")
	f, err := gateway.LoadPolicyFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.URLs.Allow) != 1 || f.URLs.BlockPrivate == nil || *f.URLs.BlockPrivate || f.Approvals.Tools[0] != "eval" {
		t.Errorf("loaded %+v", f)
	}
	// The developer tools can wait for a person too.
	dev := write("dev.yaml", "approvals:\n  tools: [network_request, pdf, emulate, storage_save, storage_delete]\n")
	if f, err := gateway.LoadPolicyFile(dev); err != nil || len(f.Approvals.Tools) != 5 {
		t.Errorf("approvals of the developer tools: %+v, %v", f, err)
	}
	if _, err := gateway.LoadPolicyFile(write("empty.yaml", "")); err != nil {
		t.Errorf("empty file: %v", err)
	}
	// The form, pointer and reading tools, and the performance and memory
	// tools, can be made to need approval.
	if _, err := gateway.LoadPolicyFile(write("forms.yaml", "approvals:\n  tools: [select_option, check, fill_form, drag, mouse, get_markdown]\n")); err != nil {
		t.Errorf("approvals naming the form tools: %v", err)
	}
	if _, err := gateway.LoadPolicyFile(write("perf.yaml", "approvals:\n  tools: [performance_start, performance_stop, performance_metrics, heap_snapshot, screencast_start, screencast_stop]\n")); err != nil {
		t.Errorf("approvals naming the performance and memory tools: %v", err)
	}
	for name, c := range map[string]struct{ body, want string }{
		"typo.yaml":    {"urls:\n  alow: [a.example]\n", "field alow not found"},
		"pattern.yaml": {"urls:\n  block: ['https://']\n", "urls.block"},
		"tool.yaml":    {"approvals:\n  tools: [evaluate]\n", `"evaluate" is not a tool`},
	} {
		_, err := gateway.LoadPolicyFile(write(name, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming the file and %q", name, err, c.want)
		}
	}
	if _, err := gateway.New(context.Background(), gateway.Config{PolicyConfig: gateway.PolicyConfig{PolicyFile: filepath.Join(dir, "missing.yaml")}}, connect(t, startNATS(t, ""))); err == nil ||
		!strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing policy file: %v", err)
	}
}

// TestApprovalConsoleOnly: with --approval-console-only a client that
// answers its own elicitation cannot approve its calls.
func TestApprovalConsoleOnly(t *testing.T) {
	t.Parallel()
	needChromium(t)
	srv := startNATS(t, "")
	startWorker(t, srv, "w1", 2)
	url := startGateway(t, srv, gateway.Config{ApprovalConfig: gateway.ApprovalConfig{ApproveTools: []string{"eval"}, ApprovalConsoleOnly: true}})
	q := console(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, modern := range []bool{false, true} {
		e := &elicitor{}
		e.decide("approve_session")
		c := elicitingClient(t, url, modern, e)
		handle := metaSession(callTool(t, c, "open", map[string]any{"url": titleSite(t)}))
		args := map[string]any{"script": "6 * 7"}
		if handle != "" {
			args["session"] = handle
		}
		call := toolCall(t, c, "eval", args)
		p := pendingOf(t, watch)
		if e.count() != 0 {
			t.Errorf("modern %v: the client was asked %d times", modern, e.count())
		}
		if _, err := q.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
			t.Fatal(err)
		}
		if res := await(t, call); res.IsError || text(res) != "42" {
			t.Errorf("modern %v: eval approved on the console: %q", modern, text(res))
		}
	}
}
