package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// runWorker runs a real worker (real Chromium) on its own connection to
// srv; stop stops it, and hard first closes its connection, so that it
// writes nothing more into the fleet, and kills its Chromium, as a
// SIGKILL of the process would.
func runWorker(t *testing.T, srv *natsrv.Server, cfg browser.Config) (stop func(hard bool)) {
	t.Helper()
	c := natstest.Bus(t, srv)
	w, err := browser.New(context.Background(), cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	stopped := false
	stop = func(hard bool) {
		if stopped {
			return
		}
		stopped = true
		if hard {
			c.NATS().Close()
			_ = w.KillChromium()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Errorf("worker %s did not stop: %v", w.ID(), err)
		}
		if err := <-done; err != nil && !hard {
			t.Errorf("worker %s: %v", w.ID(), err)
		}
	}
	t.Cleanup(func() { stop(false) })
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker %s stopped while starting: %v", w.ID(), err)
	case <-time.After(60 * time.Second):
		t.Fatalf("worker %s not ready after 60s", w.ID())
	}
	return stop
}

func call(t *testing.T, f *fleet.Fleet, workerID, sessionID string, req *browserv1.ToolRequest) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req.SessionId = sessionID
	res, err := f.Call(ctx, workerID, req)
	if err != nil {
		t.Fatalf("call %s: %v", req.GetTool(), err)
	}
	var b strings.Builder
	for _, c := range res.GetContent() {
		b.WriteString(c.GetText())
	}
	return b.String()
}

func openReq(u string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: u}}}
}

func evalReq(js string) *browserv1.ToolRequest {
	return &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Eval{Eval: &browserv1.Eval{Script: js}}}
}

// TestRestoreAfterWorkerDies: a page logs the user in (an HttpOnly
// cookie) and keeps a local storage item; the session has two tabs, the
// first active. Its worker dies hard; Restore opens the session on the
// other worker from its checkpoint, still logged in, with its storage,
// tabs and active tab. A checkpoint restores once, is sealed (no cookie in
// clear in the bucket), and goes when a session closes normally.
func TestRestoreAfterWorkerDies(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Chromium; skipped with -short")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "ada-4711", Path: "/", HttpOnly: true, MaxAge: 3600})
		fmt.Fprint(w, `<!doctype html><title>logged in</title><script>localStorage.setItem("theme", "dark")</script>`)
	})
	mux.HandleFunc("/me", func(w http.ResponseWriter, r *http.Request) {
		who := "nobody"
		if c, err := r.Cookie("sid"); err == nil {
			who = c.Value
		}
		fmt.Fprintf(w, `<!doctype html><title>me: %s</title><p>%s</p>`, who, who)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>page %s</title>`, r.URL.Path)
	})
	site := httptest.NewServer(mux)
	defer site.Close()

	keyText, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	fl := fleet.New(c, 0)
	cfg := func(id string) browser.Config {
		return browser.Config{ID: id, MaxSessions: 4, SecretKey: key, CheckpointEvery: time.Second}
	}
	stopA := runWorker(t, srv, cfg("wa"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// As from a gateway: an enforced policy (this one allows everything),
	// so the sessions come from the workers' warm pools.
	pol := &browserv1.UrlPolicy{Enforced: true}
	wid, sid, err := fl.Open(ctx, "ada", pol, "")
	if err != nil || wid != "wa" {
		t.Fatalf("Open = %s, %s, %v; want a session on wa", wid, sid, err)
	}
	call(t, fl, wid, sid, openReq(site.URL+"/login"))
	call(t, fl, wid, sid, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabNew{TabNew: &browserv1.TabNew{Url: site.URL + "/second"}}})
	call(t, fl, wid, sid, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabSwitch{TabSwitch: &browserv1.TabIndex{Index: 0}}})

	// The checkpoint holds the cookie, sealed.
	js, err := jetstream.New(c.NATS())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(c.Prefix(), "_browser_checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for: checkpoint with the cookie, two tabs and tab 0 active.
	kittest.Eventually(t, 20*time.Second, func() error {
		e, err := kv.Get(ctx, sid)
		if err != nil {
			return err
		}
		if strings.Contains(string(e.Value()), "ada-4711") {
			t.Fatal("the checkpoint holds the cookie in clear")
		}
		body, err := key.Open("browser-checkpoint/"+sid, e.Value())
		if err != nil {
			t.Fatalf("open checkpoint: %v", err)
		}
		var cp struct {
			Tabs   []string
			Active int
		}
		if err := json.Unmarshal(body, &cp); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "ada-4711") || !strings.Contains(string(body), "dark") || len(cp.Tabs) != 2 || cp.Active != 0 {
			return fmt.Errorf("checkpoint %s", body)
		}
		return nil
	})

	// The worker dies; the other one takes over the session.
	stopA(true)
	runWorker(t, srv, cfg("wb"))
	start := time.Now()
	nw, nsid, err := fl.Restore(ctx, sid, "ada", pol)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Logf("restored %s on %s as %s in %s", sid, nw, nsid, time.Since(start).Round(time.Millisecond))
	if nw != "wb" || nsid == sid {
		t.Fatalf("Restore = %s, %s; want a new session on wb", nw, nsid)
	}
	if got := call(t, fl, nw, nsid, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}); !strings.Contains(got, "logged in") {
		t.Errorf("active tab title = %q, want the first tab (logged in)", got)
	}
	if got := call(t, fl, nw, nsid, evalReq(`localStorage.getItem("theme")`)); !strings.Contains(got, "dark") {
		t.Errorf("local storage theme = %q, want dark", got)
	}
	tabs := call(t, fl, nw, nsid, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}})
	if !strings.Contains(tabs, "/login") || !strings.Contains(tabs, "/second") {
		t.Errorf("tab_list = %q, want /login and /second", tabs)
	}
	call(t, fl, nw, nsid, openReq(site.URL+"/me"))
	if got := call(t, fl, nw, nsid, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_GetTitle{GetTitle: &browserv1.NoArgs{}}}); !strings.Contains(got, "ada-4711") {
		t.Errorf("after restore, /me title = %q, want the logged-in user ada-4711", got)
	}

	// Restored once: the old checkpoint is gone.
	if _, _, err := fl.Restore(ctx, sid, "ada", pol); bus.CodeOf(err) != commonv1.ErrorCode_SESSION_NOT_FOUND {
		t.Errorf("second Restore of %s: %v (%v), want SESSION_NOT_FOUND", sid, err, bus.CodeOf(err))
	}
	// The new session checkpoints; closing it deletes its checkpoint.
	// Wait for: checkpoint of the restored session.
	kittest.Eventually(t, 20*time.Second, func() error {
		_, err := kv.Get(ctx, nsid)
		return err
	})
	if err := fl.Close(ctx, nw, nsid); err != nil {
		t.Fatal(err)
	}
	// Wait for: checkpoint deleted on close.
	kittest.Eventually(t, 10*time.Second, func() error {
		if _, err := kv.Get(ctx, nsid); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
}

// TestForget: the gateway deletes a checkpoint its worker cannot; without
// a bucket or a checkpoint, Forget does nothing.
func TestForget(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	fl := fleet.New(c, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fl.Forget(ctx, "s1"); err != nil {
		t.Fatalf("Forget without a bucket: %v", err)
	}
	kv, err := kvbucket.OpenKV(ctx, c.NATS(), kvbucket.Spec{Config: jetstream.KeyValueConfig{Bucket: bus.BucketName(c.Prefix(), "_browser_checkpoints")}, Keeps: "the test keeps checkpoints"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "s1", []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	if err := fl.Forget(ctx, "s1"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := kv.Get(ctx, "s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after Forget, Get = %v, want ErrKeyNotFound", err)
	}
	if err := fl.Forget(ctx, "s2"); err != nil {
		t.Fatalf("Forget of a session without a checkpoint: %v", err)
	}
}
