package signer

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"os"
	"path/filepath"
	"testing"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
)

func TestPolicyDecide(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy([]Rule{
		{Origin: "https://snort.example", Op: OpSign, Kinds: []int{0, 3}, Action: Allow},
		{Origin: "https://*.evil.example", Action: Deny},
		{Origin: "https://chat.example", Op: OpDecrypt, Action: Allow},
	})
	if err != nil {
		t.Fatal(err)
	}
	top := "https://app.example"
	for _, c := range []struct {
		name           string
		origin, top    string
		op             Op
		kind           int
		want           Action
		ruleHasDefault bool
	}{
		{"top page signs kind 1", top, top, OpSign, 1, Allow, true},
		{"top page with default port", "https://app.example:443", top, OpSign, 1, Allow, true},
		{"top page signs kind 0", top, top, OpSign, 0, Ask, true},
		{"top page decrypts", top, top, OpDecrypt, 0, Ask, true},
		{"top page encrypts", top, top, OpEncrypt, 0, Allow, true},
		{"top page reads the key", top, top, OpGetPublicKey, 0, Allow, true},
		{"third-party frame signs kind 1", "https://widget.example", top, OpSign, 1, Ask, true},
		{"third-party frame reads the key", "https://widget.example", top, OpGetPublicKey, 0, Ask, true},
		{"opaque origin never matches top", "null", "null", OpSign, 1, Ask, true},
		{"operator allows kind 0", "https://snort.example", "https://snort.example", OpSign, 0, Allow, false},
		{"operator rule is kind-limited", "https://snort.example", "https://snort.example", OpSign, 5, Ask, true},
		{"subdomain denied", "https://a.b.evil.example", "https://a.b.evil.example", OpSign, 1, Deny, false},
		{"wildcard does not match the apex", "https://evil.example", "https://evil.example", OpSign, 1, Allow, true},
		{"scheme matters", "http://x.evil.example", "http://x.evil.example", OpSign, 1, Allow, true},
		{"operator allows decrypt", "https://chat.example", "https://chat.example", OpDecrypt, 0, Allow, false},
	} {
		got, rule := p.Decide(Request{Origin: c.origin, TopOrigin: c.top, Op: c.op, Kind: c.kind})
		if got != c.want || strings.HasSuffix(rule.String(), "(default)") != c.ruleHasDefault {
			t.Errorf("%s: %s by %q, want %s (default rule: %v)", c.name, got, rule, c.want, c.ruleHasDefault)
		}
	}
	lines := p.Lines()
	if len(lines) != 7 || lines[0] != "allow sign kinds 0,3 from https://snort.example" ||
		lines[3] != "ask sign kinds 0,3,5,10002 from any origin (default)" ||
		lines[5] != "allow * from the top-level page's origin (default)" {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
}

func TestLoadPolicyErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"rules:\n  - origin: https://a.example\n    action: maybe\n", `rule 1: action "maybe": must be allow, deny or ask`},
		{"rules:\n  - origin: https://a.example/path\n    action: allow\n", `must be scheme://host[:port] with nothing after it`},
		{"rules:\n  - origin: https://a.*.example\n    action: allow\n", `a wildcard may only be the first label`},
		{"rules:\n  - action: allow\n", `origin is required`},
		{"rules:\n  - origin: '*'\n    op: decrypt\n    kinds: [1]\n    action: allow\n", `kinds only apply to op: sign`},
		{"rules:\n  - origin: '*'\n    op: sign\n    kinds: [70000]\n    action: allow\n", `kind 70000: must be 0 to 65535`},
		{"rules:\n  - origin: '*'\n    op: publish\n    action: allow\n", `op "publish"`},
		{"rulez: []\n", `field rulez not found`},
	} {
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPolicy(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: error %v, want it to name the file and say %q", c.yaml, err, c.want)
		}
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	_ = os.WriteFile(empty, nil, 0o600)
	if p, err := LoadPolicy(empty); err != nil || len(p.Lines()) != 4 {
		t.Errorf("empty file: %v", err)
	}
}

// TestPolicyOverTheBus: the operator's policy decides for pages, a frame of
// another origin than the top-level page asks, and login_status shows the
// rules.
func TestPolicyOverTheBus(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy([]Rule{{Origin: "https://profile.example", Op: OpSign, Kinds: []int{0}, Action: Allow},
		{Origin: "https://blocked.example", Action: Deny}})
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, Config{Policy: p})
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	if r, err := e.sign("a", "https://profile.example", 0); err != nil {
		t.Fatal(err)
	} else {
		verified(t, r, vecPub12)
	}
	_, err = e.sign("a", "https://blocked.example", 1)
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "signing a kind 1 event for https://blocked.example is denied by the signer's policy", "deny * from https://blocked.example")
	err = e.call("sign_event", &signerv1.SignEvent{Scope: "a", Origin: "https://widget.example", TopOrigin: "https://app.example",
		Event: &signerv1.UnsignedEvent{Kind: 1}}, &signerv1.SignEventResponse{})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "for https://widget.example needs approval", "ask * from any origin")
	err = e.call("get_public_key", &signerv1.GetPublicKey{Scope: "a", Origin: "https://widget.example", TopOrigin: "https://app.example"}, &signerv1.GetPublicKeyResponse{})
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "reading the public key for https://widget.example needs approval")
	st := e.status("a")
	if len(st.GetPolicy()) != 6 || st.GetPolicy()[0] != "allow sign kinds 0 from https://profile.example" {
		t.Fatalf("status policy: %q", st.GetPolicy())
	}
}

// TestAskOnTheConsole: an "ask" waits in the fleet's approval queue, where
// the console decides; approve-for-session grants that origin and kind for
// the rest of the browser session only.
func TestAskOnTheConsole(t *testing.T) {
	t.Parallel()
	e := startWith(t, Config{ApprovalTimeout: 20 * time.Second})
	q, err := approval.Open(context.Background(), e.c.NATS(), e.c.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	e.mustLogin(&signerv1.Login{Scope: "b", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	// decide answers the next pending request, after checking what it shows.
	decide := func(approve bool, scope approval.Scope) <-chan approval.Request {
		out := make(chan approval.Request, 1)
		go func() {
			// Up to the signer's approval timeout: the request may be
			// slow to appear on a loaded machine.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
				list, _ := q.List(context.Background())
				for _, r := range list {
					if r.State == approval.Pending {
						d, err := q.Decide(context.Background(), r.ID, approve, scope, "console:admin", "")
						if err != nil {
							t.Error(err)
						}
						out <- d
						return
					}
				}
				time.Sleep(25 * time.Millisecond) // polls in a goroutine of its own (no t.Fatal there), bounded above
			}
			t.Error("no pending request appeared")
			close(out)
		}()
		return out
	}
	got := decide(true, approval.Session)
	r, err := e.sign("a", "https://app.example", 0)
	if err != nil {
		t.Fatal(err)
	}
	verified(t, r, vecPub12)
	req := <-got
	if req.Tool != "window.nostr.signEvent" || req.Arguments != `{"origin":"https://app.example","top_origin":"https://app.example","kind":0}` ||
		req.Caller != "page https://app.example" || !strings.Contains(req.Reason, "signing a kind 0 event for https://app.example") {
		t.Fatalf("request: %+v", req)
	}
	// Granted for the session: no second request.
	if _, err := e.sign("a", "https://app.example", 0); err != nil {
		t.Fatalf("after approve for session: %v", err)
	}
	// Not for another kind, not for another session.
	got = decide(false, "")
	_, err = e.sign("a", "https://app.example", 3)
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "signing a kind 3 event", "not approved: denied by console:admin")
	<-got
	got = decide(true, approval.Once)
	if _, err := e.sign("b", "https://app.example", 0); err != nil {
		t.Fatal(err)
	}
	<-got
	// A grant is for the identity it was given to: after switching
	// identities in session a, kind 0 asks again.
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_SEED, Mnemonic: vecMnemonic24})
	got = decide(false, "")
	_, err = e.sign("a", "https://app.example", 0)
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "signing a kind 0 event", "denied by console:admin")
	<-got
	if list, _ := q.List(context.Background()); len(list) != 4 {
		t.Fatalf("%d requests, want 4", len(list))
	}
}

// TestPolicyOriginSpellings: the same origin spelled with a trailing dot,
// its default port, upper case or Unicode is the same origin to the rules.
func TestPolicyOriginSpellings(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy([]Rule{
		{Origin: "https://*.evil.net", Action: Deny},
		{Origin: "https://evil.net", Action: Deny},
		{Origin: "https://bücher.example", Action: Deny},
		{Origin: "http://app.example:8080", Action: Deny},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"https://evil.net.", "https://www.evil.net.", "https://EVIL.net:443", "https://xn--bcher-kva.example",
		"https://xn--bcher-kva.example.", "http://app.example.:8080"} {
		if got, rule := p.Decide(Request{Origin: o, TopOrigin: o, Op: OpSign, Kind: 1}); got != Deny {
			t.Errorf("%s: %s by %q, want deny", o, got, rule)
		}
	}
	// Another port is another origin (as browsers say): the default rules.
	if got, _ := p.Decide(Request{Origin: "https://evil.net:8443", TopOrigin: "https://evil.net:8443", Op: OpSign, Kind: 1}); got != Allow {
		t.Errorf("another port: %s", got)
	}
}

// TestAuditOfPageRequests: every window.nostr request from a page reaches
// the audit stream as a call of window.nostr.<method> by "page <origin>",
// with the kind and what happened, never the content; the agent's own
// requests (no origin) are the gateway's to record.
func TestAuditOfPageRequests(t *testing.T) {
	t.Parallel()
	e := start(t)
	records := make(chan *historyv1.AuditRecord, 16)
	sub, err := e.c.NATS().Subscribe(audit.RecordSubject(e.c.Prefix(), "signer"), func(m *nats.Msg) {
		r := &historyv1.AuditRecord{}
		if proto.Unmarshal(m.Data, r) == nil {
			records <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	e.mustLogin(&signerv1.Login{Scope: "a", Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12})
	signed, err := e.sign("a", "https://app.example", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.sign("a", "https://app.example", 0) // asks; nobody decides
	wantErr(t, err, commonv1.ErrorCode_FORBIDDEN, "needs approval")
	if _, err := e.sign("a", "", 1); err != nil { // the agent's own: not recorded here
		t.Fatal(err)
	}
	next := func() *historyv1.AuditRecord {
		select {
		case r := <-records:
			return r
		case <-time.After(15 * time.Second):
			t.Fatal("no audit record")
		}
		return nil
	}
	ok, denied := next(), next()
	if ok.GetTool() != "window.nostr.signEvent" || ok.GetCaller() != "page https://app.example" || ok.GetBrowserSession() != "a" ||
		ok.GetOutcome() != historyv1.Outcome_OUTCOME_OK || ok.GetSource() != "signer" ||
		ok.GetArguments() != `{"origin":"https://app.example","top_origin":"https://app.example","kind":1}` ||
		ok.GetResult() != "signed event "+signed.GetId()+" (kind 1)" {
		t.Errorf("signed: %v", ok)
	}
	if denied.GetOutcome() != historyv1.Outcome_OUTCOME_DENIED || !strings.Contains(denied.GetResult(), "needs approval") || !strings.Contains(denied.GetArguments(), `"kind":0`) {
		t.Errorf("denied: %v", denied)
	}
	for _, r := range []*historyv1.AuditRecord{ok, denied} {
		if strings.Contains(r.String(), "hello from the test") {
			t.Errorf("the event's content reached the trail: %v", r)
		}
	}
	select {
	case r := <-records:
		t.Errorf("a record for the agent's own request: %v", r)
	case <-time.After(300 * time.Millisecond):
	}
}
