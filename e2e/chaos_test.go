package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// The chaos tests: separate processes, a real nats-server, clients in a
// browsing loop while something breaks. Each prints its figures.

// browseLoop has every client read its cookie page until stop, counting the
// calls and the failures (with the first few messages).
type browseLoop struct {
	calls, failed atomic.Int64
	mu            sync.Mutex
	lastFail      time.Time
	firstErrs     []string
}

func (l *browseLoop) run(ctx context.Context, stop <-chan struct{}, clients []*harness.MCPClient, site string) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				_, err := callText(cctx, c, "open", map[string]any{"url": site + "/cookie/show"})
				cancel()
				l.calls.Add(1)
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					l.lastFail = time.Now()
					if len(l.firstErrs) < 3 {
						l.firstErrs = append(l.firstErrs, fmt.Sprintf("client %d: %v", i, err))
					}
					l.mu.Unlock()
					time.Sleep(100 * time.Millisecond) // spaces a failing client's tries: the load goes on, it is not a wait
				}
			}
		})
	}
	return &wg
}

// withCookies opens n clients on url, each with its own cookie who=c<i>.
func withCookies(t *testing.T, ctx context.Context, url, site string, n int) []*harness.MCPClient {
	t.Helper()
	clients := make([]*harness.MCPClient, n)
	for i := range clients {
		clients[i] = initClient(t, ctx, url)
	}
	each(t, "set a cookie", clients, func(i int, c *harness.MCPClient) error {
		_, err := callText(ctx, c, "open", map[string]any{"url": fmt.Sprintf("%s/cookie/set?v=c%d", site, i)})
		return err
	})
	return clients
}

// sameSessions checks that every client still has its own cookie: its
// browser session is the one it started with.
func sameSessions(t *testing.T, ctx context.Context, clients []*harness.MCPClient, site string) {
	t.Helper()
	each(t, "check the cookie", clients, func(i int, c *harness.MCPClient) error {
		if _, err := callText(ctx, c, "open", map[string]any{"url": site + "/cookie/show"}); err != nil {
			return err
		}
		got, err := callText(ctx, c, "get_text", map[string]any{"selector": "#who"})
		if err != nil {
			return err
		}
		return want("cookie", got, fmt.Sprintf("c%d", i))
	})
}

// TestChaosNATSRestart: 8 clients browse while nats-server is stopped and
// started again. Calls during the outage fail fast with a clear error; all
// sessions carry on afterwards (their cookies are still there), watched for
// 30 s after NATS is back.
func TestChaosNATSRestart(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 10})
	site := newSite(t)
	ctx := callCtx(t, 4*time.Minute)
	url := f.Gateways[0].MCP
	clients := withCookies(t, ctx, url, site, 8)

	loop := &browseLoop{}
	stop := make(chan struct{})
	wg := loop.run(ctx, stop, clients, site)
	time.Sleep(2 * time.Second) // time passes: the load runs before the outage
	down := time.Now()
	if err := f.StopNATS(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // time passes: the outage lasts a while
	if _, err := f.RestartNATS(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	failedAtBack := loop.failed.Load()
	time.Sleep(30 * time.Second) // time passes: the load runs on after the outage, and must recover
	close(stop)
	wg.Wait()

	loop.mu.Lock()
	recovered := loop.lastFail.Sub(back)
	loop.mu.Unlock()
	t.Logf("NATS down %s; %d calls, %d failed (%d after NATS was back); last failure %s after it was back; first errors: %s",
		back.Sub(down).Round(time.Millisecond), loop.calls.Load(), loop.failed.Load(), loop.failed.Load()-failedAtBack,
		recovered.Round(time.Millisecond), strings.Join(loop.firstErrs, " | "))
	if recovered > 10*time.Second {
		t.Errorf("calls still failed %s after NATS was back; want them working within seconds", recovered.Round(time.Second))
	}
	for _, e := range loop.firstErrs {
		if !strings.Contains(e, "NATS") && !strings.Contains(e, "did not answer") && !strings.Contains(e, "reconnect") {
			t.Errorf("an outage error does not say what happened: %s", e)
		}
	}
	sameSessions(t, ctx, clients, site)
}

// TestChaosAbandoned: clients that go away without DELETE do not lock the
// fleet: their browser sessions are given back after the MCP idle timeout,
// and as many new clients get sessions within seconds.
func TestChaosAbandoned(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 16,
		gatewayArgs: []string{"--mcp-idle-timeout", "3s", "--sessions-per-caller", "100"}})
	site := newSite(t)
	ctx := callCtx(t, 3*time.Minute)
	url := f.Gateways[0].MCP
	leaving := make([]*harness.MCPClient, 20)
	for i := range leaving {
		leaving[i] = initClient(t, ctx, url)
	}
	var n atomic.Int64
	each(t, "open, then go away without DELETE", leaving, func(i int, c *harness.MCPClient) error {
		if _, err := callText(ctx, c, "open", map[string]any{"url": site + "/form"}); err == nil {
			n.Add(1)
		}
		return nil
	})
	opened := int(n.Load())
	if opened != 16 {
		t.Fatalf("%d of 20 clients got a session on a fleet of 16", opened)
	}
	gone := time.Now()
	fresh := make([]*harness.MCPClient, 16)
	for i := range fresh {
		fresh[i] = initClient(t, ctx, url)
	}
	var last atomic.Int64
	each(t, "a new client gets a session", fresh, func(i int, c *harness.MCPClient) error {
		for {
			_, err := callText(ctx, c, "open", map[string]any{"url": site + "/form"})
			if err == nil {
				last.Store(int64(time.Since(gone)))
				return nil
			}
			if !strings.Contains(err.Error(), "no browser capacity") && !strings.Contains(err.Error(), "can take a session") || ctx.Err() != nil {
				return err
			}
			time.Sleep(250 * time.Millisecond) // spaces the tries (in a goroutine of each: no t to fail)
		}
	})
	took := time.Duration(last.Load())
	t.Logf("20 clients went away (16 had sessions); 16 new clients all had sessions %s later (MCP idle timeout 3s)", took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("the new clients waited %s for sessions", took)
	}
}

// TestChaosGreedyCaller: one anonymous 2026-style caller opening sessions
// as fast as it can (no session argument) gets at most its limit and is told
// how to reuse its handle; callers with tokens still get sessions.
func TestChaosGreedyCaller(t *testing.T) {
	t.Parallel()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 16})
	ctx := callCtx(t, 3*time.Minute)
	url := f.Gateways[0].MCP
	greedy := modernClient(t, ctx, url, "") // 2026: every call without a handle opens a session
	var got, refused int
	var refusal string
	for range 20 {
		res, err := callModern(ctx, greedy, "get_url", nil)
		switch {
		case err != nil:
			t.Fatalf("greedy call: %v", err)
		case !res.IsError:
			got++
		case strings.Contains(resultText(res), "limit"):
			refused++
			refusal = resultText(res)
		default:
			t.Fatalf("greedy call: %s", resultText(res))
		}
	}
	t.Logf("the greedy caller got %d sessions and %d refusals: %s", got, refused, refusal)
	if got != 8 || !strings.Contains(refusal, `as "session"`) {
		t.Errorf("greedy caller: %d sessions, refusal %q; want the default limit of 8 and a hint to pass the handle", got, refusal)
	}
	for i := range 4 {
		tok, err := f.Token(ctx, fmt.Sprintf("polite-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		c := harness.NewMCPClient(url)
		c.Header.Set("Authorization", "Bearer "+tok)
		// The gateways learn of a new token within moments.
		kittest.Eventually(t, 30*time.Second, func() error {
			if _, err := c.Initialize(ctx); err != nil {
				return fmt.Errorf("initialize with token %d: %w", i, err)
			}
			return nil
		})
		if _, err := callText(ctx, c, "get_url", nil); err != nil {
			t.Errorf("caller %d with its own token: %v", i, err)
		}
	}
}

// TestChaosWorkerKilled: 8 clients browse over two workers that keep
// checkpoints (they hold the operator secret key); one worker is killed
// with SIGKILL. Only the calls in flight on it fail, each clearly; every
// one of its sessions comes back on the other worker with its cookies; no
// session of the other worker sees an error.
func TestChaosWorkerKilled(t *testing.T) {
	secretKey := strings.Repeat("ab", 32)
	t.Setenv("SOVEREIGN_SECRET_KEY", secretKey) // inherited by the workers
	f := startFleet(t, fleetSpec{workers: 2, gateways: 1, maxSessions: 10})
	site := newSite(t)
	ctx := callCtx(t, 4*time.Minute)
	url := f.Gateways[0].MCP
	clients := withCookies(t, ctx, url, site, 8)
	waitCheckpoints(t, ctx, f, secretKey, len(clients))

	loop := &browseLoop{}
	stop := make(chan struct{})
	wg := loop.run(ctx, stop, clients, site)
	time.Sleep(2 * time.Second) // time passes: the load runs before the kill
	victim := f.Workers[0]
	spread := f.Sessions(ctx)
	killed := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // time passes: the load runs on after the kill, and must recover
	close(stop)
	wg.Wait()
	loop.mu.Lock()
	lastFail := loop.lastFail
	errs := loop.firstErrs
	loop.mu.Unlock()
	t.Logf("sessions per worker before the kill %v; %s killed; %d calls, %d failed; last failure %s after the kill; errors: %s",
		spread, victim.ID, loop.calls.Load(), loop.failed.Load(), lastFail.Sub(killed).Round(time.Millisecond), strings.Join(errs, " | "))
	if n := loop.failed.Load(); n > int64(spread[victim.ID]) {
		t.Errorf("%d calls failed; want at most the %d in flight on the killed worker", n, spread[victim.ID])
	}
	for _, e := range errs {
		if !strings.Contains(e, "restored") {
			t.Errorf("a failed call does not say its session was restored: %s", e)
		}
	}
	start := time.Now()
	sameSessions(t, ctx, clients, site)
	t.Logf("every client has its own cookie again (checked in %s)", time.Since(start).Round(time.Millisecond))
}

// waitCheckpoints waits (at most a minute) until the workers' checkpoint
// bucket holds a checkpoint with the cookie who=c<i> of each of the n
// clients of withCookies, opened with the operator key keyText. A worker
// writes a session's checkpoint on its own schedule (a tick after a call
// changed it, a capture that a busy machine can make late or time out), so
// a fixed pause before the kill could leave a session without one.
func waitCheckpoints(t *testing.T, ctx context.Context, f *harness.Fleet, keyText string, n int) {
	t.Helper()
	key, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(f.Bus().NATS())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(f.Bus().Prefix(), "_browser_checkpoints"))
	if err != nil {
		t.Fatalf("checkpoint bucket: %v", err)
	}
	start := time.Now()
	kittest.Eventually(t, time.Minute, func() error {
		have := map[string]bool{}
		ids, err := kv.Keys(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			t.Fatalf("list checkpoints: %v", err)
		}
		for _, id := range ids {
			e, err := kv.Get(ctx, id)
			if err != nil {
				continue // closed (purged) meanwhile
			}
			body, err := key.Open("browser-checkpoint/"+id, e.Value())
			if err != nil {
				t.Fatalf("open the checkpoint of session %s: %v", id, err)
			}
			var cp struct {
				Cookies []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"cookies"`
			}
			if err := json.Unmarshal(body, &cp); err != nil {
				t.Fatalf("checkpoint of session %s: %v", id, err)
			}
			for _, c := range cp.Cookies {
				if c.Name == "who" {
					have[c.Value] = true
				}
			}
		}
		var missing []string
		for i := range n {
			if v := fmt.Sprintf("c%d", i); !have[v] {
				missing = append(missing, v)
			}
		}
		return kittest.Check(len(missing) == 0, "no checkpoint holds the cookie of %v (%d checkpoints)", missing, len(ids))
	})
	t.Logf("every session had a checkpoint with its cookie %s after the cookies were set", time.Since(start).Round(time.Millisecond))
}
