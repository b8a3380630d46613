package sovereign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// runToken runs `sovereign token args…` against srv and returns its output.
func runToken(t *testing.T, srv *natsrv.Server, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := tokenCmd(ctx, append(args, "--nats-url", srv.ClientURL()), &out)
	return out.String(), err
}

var plainRE = regexp.MustCompile(`svt_[0-9a-f]{16}_[0-9a-f]{64}`)

// TestTokenCommand: create prints the token once with how to use it, list
// shows tokens without secrets, revoke makes a gateway's store refuse it.
func TestTokenCommand(t *testing.T) {
	srv, err := natsrv.Start(natsrv.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	t.Setenv("SOVEREIGN_PUBLIC_URL", "")

	out, err := runToken(t, srv, "create", "--name", "ci-agent", "--allow", "*.example.com", "--block", "evil.example.com",
		"--approve", "eval", "--approve", "click", "--url", "http://gw.internal:8080/mcp")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	plain := plainRE.FindString(out)
	if plain == "" {
		t.Fatalf("create printed no token:\n%s", out)
	}
	for _, want := range []string{
		`Created API token "ci-agent"`,
		"the only time the token is shown",
		`claude mcp add --transport http sovereign http://gw.internal:8080/mcp --header "Authorization: Bearer ` + plain + `"`,
		"allows *.example.com; blocks evil.example.com; needs approval for eval, click",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}

	// What a gateway does with it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gw, err := tokens.Open(ctx, natstest.Conn(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	tok, err := gw.Verify(plain)
	if err != nil {
		t.Fatalf("the printed token does not verify: %v", err)
	}
	if tok.Name != "ci-agent" || strings.Join(tok.Approve, ",") != "eval,click" || tok.URLAllow[0] != "*.example.com" || tok.URLBlock[0] != "evil.example.com" {
		t.Errorf("stored token = %+v", tok)
	}

	if out, err := runToken(t, srv, "create", "--name", "ci-agent"); err == nil || !strings.Contains(err.Error(), `a token named "ci-agent" already exists`) {
		t.Errorf("duplicate create: %v\n%s", err, out)
	}
	var usage app.UsageError
	for _, args := range [][]string{
		{"create"},
		{"create", "--name", "Bad Name"},
		{"create", "--name", "x", "--approve", "rm_rf"},
		{"revoke"},
		{"list", "extra"},
		{"frobnicate"},
	} {
		if _, err := runToken(t, srv, args...); !errors.As(err, &usage) {
			t.Errorf("token %v: %v, want a usage error", args, err)
		}
	}

	out, err = runToken(t, srv, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^NAME\s+ID\s+CREATED\s+LAST USED\s+STATE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ci-agent\s+`+tok.ID+`\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+(never|\d{4}-\d\d-\d\d \d\d:\d\d)\s+active$`).MatchString(out) {
		t.Errorf("list:\n%s", out)
	}
	if strings.Contains(out, plain[21:]) {
		t.Error("list shows the secret")
	}

	// Flags may follow the name.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	var rout bytes.Buffer
	if err := tokenCmd(ctx2, []string{"revoke", "ci-agent", "--nats-url", srv.ClientURL()}, &rout); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if !strings.Contains(rout.String(), `Revoked token "ci-agent" (id `+tok.ID+`)`) {
		t.Errorf("revoke output: %s", rout.String())
	}
	kittest.Eventually(t, 30*time.Second, func() error { // the watch of a loaded machine may lag
		_, err := gw.Verify(plain)
		return kittest.Check(errors.Is(err, tokens.ErrRevoked), "after revoke the gateway's store still says %v", err)
	})
	if _, err := runToken(t, srv, "revoke", tok.ID); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Errorf("second revoke: %v", err)
	}

	out, err = runToken(t, srv, "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(list) != 1 || list[0]["id"] != tok.ID || list[0]["name"] != "ci-agent" || list[0]["revoked_at"] == nil || list[0]["created_by"] == "" {
		t.Errorf("list --json = %s", out)
	}
	if strings.Contains(out, "sha256") || strings.Contains(out, plain[21:]) {
		t.Errorf("list --json shows the secret or its digest: %s", out)
	}
}

// TestUpExposedNeedsToken: `sovereign up` listening beyond loopback refuses
// to start while no API token exists; the documented way out (start on
// loopback, create a token, start again exposed) works, and then requests
// need the token.
func TestUpExposedNeedsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := []string{"--nats-listen", "127.0.0.1:0", "--addr-file", addrFile(dir), "--data-dir", dir, "--workers", "0", "--history=false"}
	run := func(listen string) (context.CancelFunc, <-chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Command(ctx, "up", append([]string{"--listen", listen}, base...)) }()
		return cancel, done
	}
	// serving waits for the addresses of the up that done follows.
	serving := func(done <-chan error) upAddresses {
		return kittest.EventuallyValue(t, 60*time.Second, func() (upAddresses, error) {
			if len(done) > 0 {
				t.Fatal("up returned before serving")
			}
			return readAddrFile(dir)
		})
	}

	cancel, done := run("0.0.0.0:0")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "refusing to serve MCP") || !strings.Contains(err.Error(), "sovereign token create --name <name>") {
			t.Fatalf("exposed up without tokens = %v, want the refusal", err)
		}
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("exposed up without tokens kept running")
	}
	cancel()

	stop := func(cancel context.CancelFunc, done <-chan error) {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("up returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("up did not stop")
		}
	}
	cancel, done = run("127.0.0.1:0")
	a := serving(done)
	var out bytes.Buffer
	ctx, cctx := context.WithTimeout(context.Background(), 20*time.Second)
	defer cctx()
	if err := tokenCmd(ctx, []string{"create", "--name", "remote", "--nats-url", a.NATS}, &out); err != nil {
		t.Fatalf("token create against up's NATS: %v", err)
	}
	plain := plainRE.FindString(out.String())
	stop(cancel, done)

	cancel, done = run("0.0.0.0:0")
	mcpURL := serving(done).MCP // on 127.0.0.1
	for auth, want := range map[string]int{"": http.StatusUnauthorized, "Bearer " + plain: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("exposed up, with a token %v: status %d, want %d", auth != "", resp.StatusCode, want)
		}
	}
	stop(cancel, done)
}
