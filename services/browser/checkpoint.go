package browser

// Checkpoints: a worker with the operator secret key writes each of its
// sessions' state into the fleet, so that a session outlives its worker
// (or its Chromium). What is kept: the cookies of the session's browser
// context (Storage.getCookies), the local storage of the origin of each
// open tab, the tabs' URLs, the active tab, the base profile the session
// started from, what resize and emulate set (emulate.go), and its Nostr
// identity (the public key window.nostr
// answers for; the key itself stays in the signer). It goes into the JetStream KV bucket
// <prefix>_browser_checkpoints (file storage, the fleet's replica count,
// a TTL), one key per session id, sealed with the operator key as the
// secret store seals a secret (AES-256-GCM, bound to the session id).
//
// When: after a call changed the session (debounced to the next tick of
// checkpointTick, once the call released the session), and at least
// every Config.CheckpointEvery, because pages change cookies and storage
// on their own. An unchanged state is not written again until half the
// TTL has passed. Closing a session (close, idle timeout) deletes its
// checkpoint; a worker that stops, gracefully or not, leaves them, so the
// sessions can be restored elsewhere (restore, below).
//
// Restore (sov.browser.restore, in the open queue group) opens a new
// session from a checkpoint: on the same base profile, cookies set into
// the new browser context (Storage.setCookies), each tab reopened at its
// URL with the local storage of its origin put back before the page's
// own scripts run, the active tab set. What is lost: in-page JavaScript
// state, form fields not yet submitted, session storage, open dialogs,
// history, and the refs of earlier snapshots.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// checkpointTick is how often the worker looks for sessions to
// checkpoint: the debounce of a change.
const checkpointTick = 500 * time.Millisecond

// captureTimeout bounds reading a session's state, during which its calls
// wait.
const captureTimeout = 2 * time.Second

// maxCheckpointBytes bounds one sealed checkpoint (the NATS payload
// limit is 1 MiB by default); a larger one is not written, and logged.
const maxCheckpointBytes = 900 << 10

// checkpoint is a session's state as stored (JSON, then sealed).
type checkpoint struct {
	Session string            `json:"session"`
	Worker  string            `json:"worker"`
	Owner   string            `json:"owner,omitempty"`
	Profile string            `json:"profile,omitempty"`
	Pubkey  string            `json:"pubkey,omitempty"` // the Nostr identity of window.nostr (nostr.go)
	Cookies []*network.Cookie `json:"cookies,omitempty"`
	Storage []originStorage   `json:"storage,omitempty"`
	Tabs    []string          `json:"tabs"`
	Active  int               `json:"active"`
	Time    time.Time         `json:"time"`
	// Emulation is what resize and emulate set (emulate.go), nil for none.
	Emulation *page.Emulation `json:"emulation,omitempty"`
}

// originStorage is the local storage of one origin, as key/value pairs.
type originStorage struct {
	Origin string      `json:"origin"`
	Items  [][2]string `json:"items"`
}

// checkpoints is the worker's checkpoint state; nil when checkpoints are
// off (no secret key, or Config.CheckpointEvery < 0).
type checkpoints struct {
	kv    jetstream.KeyValue
	every time.Duration
	ttl   time.Duration

	mu      sync.Mutex
	dirty   map[string]bool
	written map[string]written
}

type written struct {
	sum  [32]byte
	at   time.Time // when last written
	seen time.Time // when last captured
}

// checkpointBucket is the name of the checkpoint bucket of prefix.
func checkpointBucket(prefix string) string { return bus.BucketName(prefix, "_browser_checkpoints") }

// openCheckpoints opens the checkpoint bucket when the worker has a key.
func (w *Worker) openCheckpoints(ctx context.Context, c *bus.Conn) error {
	switch {
	case w.cfg.SecretKey == nil:
		w.log.Info("session checkpoints are off: the worker has no operator secret key to seal them with")
		return nil
	case w.cfg.CheckpointEvery < 0:
		w.log.Info("session checkpoints are off (--checkpoint-every below zero)")
		return nil
	}
	kv, err := kvbucket.OpenKV(ctx, c.NATS(), kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      checkpointBucket(c.Prefix()),
			Description: "Sovereign browser session checkpoints (sealed with the operator key)",
			History:     1,
			TTL:         w.cfg.CheckpointTTL,
		},
		Keeps: "browser workers keep session checkpoints",
	})
	if err != nil {
		return err
	}
	w.ckpt = &checkpoints{kv: kv, every: w.cfg.CheckpointEvery, ttl: w.cfg.CheckpointTTL,
		dirty: make(map[string]bool), written: make(map[string]written)}
	return nil
}

// markChanged notes that session id changed: it is checkpointed at the
// next tick.
func (w *Worker) markChanged(id string) {
	if ck := w.ckpt; ck != nil {
		ck.mu.Lock()
		ck.dirty[id] = true
		ck.mu.Unlock()
	}
}

// dropCheckpoint deletes the checkpoint of a session that closed normally.
func (w *Worker) dropCheckpoint(ctx context.Context, id string) {
	ck := w.ckpt
	if ck == nil {
		return
	}
	ck.mu.Lock()
	delete(ck.dirty, id)
	delete(ck.written, id)
	ck.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := ck.kv.Purge(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		w.log.Warn("delete session checkpoint", "session", id, "err", err)
	}
}

// checkpointLoop checkpoints sessions until ctx ends; Run owns it.
func (w *Worker) checkpointLoop(ctx context.Context) {
	ck := w.ckpt
	if ck == nil {
		return
	}
	t := time.NewTicker(checkpointTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		all := make([]*session, 0, len(w.sessions))
		for _, s := range w.sessions {
			all = append(all, s)
		}
		w.mu.Unlock()
		ck.forgetGone(all)
		now := time.Now()
		for _, s := range all {
			ck.mu.Lock()
			due := ck.dirty[s.id] || now.Sub(ck.written[s.id].seen) >= ck.every
			ck.mu.Unlock()
			if due && ctx.Err() == nil {
				w.checkpointSession(ctx, s)
			}
		}
	}
}

// forgetGone drops the state of sessions no longer open (lost with their
// Chromium: their checkpoints stay in the bucket, to be restored).
func (ck *checkpoints) forgetGone(open []*session) {
	ids := make(map[string]bool, len(open))
	for _, s := range open {
		ids[s.id] = true
	}
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for id := range ck.written {
		if !ids[id] {
			delete(ck.written, id)
		}
	}
	for id := range ck.dirty {
		if !ids[id] {
			delete(ck.dirty, id)
		}
	}
}

// checkpointSession captures s and writes it when it changed. A session
// busy with a call is skipped: the call marks it changed when it ends.
func (w *Worker) checkpointSession(ctx context.Context, s *session) {
	select {
	case s.lock <- struct{}{}:
	default:
		return
	}
	ck := w.ckpt
	ck.mu.Lock()
	delete(ck.dirty, s.id)
	ck.mu.Unlock()
	// Held until written: a close waits for it, so its delete comes last.
	defer func() { <-s.lock }()
	// Bounded: a call waits for the capture (a page whose main thread is
	// busy answers late; its next checkpoint comes at the next interval).
	cctx, cancel := context.WithTimeout(ctx, captureTimeout)
	cp, err := s.capture(cctx)
	cancel()
	if err != nil {
		if s.ctx.Err() == nil && ctx.Err() == nil {
			w.log.Warn("checkpoint session", "session", s.id, "err", err)
		}
		return
	}
	cp.Worker = w.cfg.ID
	body, err := json.Marshal(cp)
	if err != nil {
		w.log.Error("encode session checkpoint", "session", s.id, "err", err)
		return
	}
	sum := sha256.Sum256(body)
	now := time.Now()
	ck.mu.Lock()
	prev := ck.written[s.id]
	ck.written[s.id] = written{sum: prev.sum, at: prev.at, seen: now}
	ck.mu.Unlock()
	if prev.sum == sum && now.Sub(prev.at) < ck.ttl/2 {
		return
	}
	cp.Time = now.UTC()
	if body, err = json.Marshal(cp); err != nil {
		return
	}
	sealed, err := w.cfg.SecretKey.Seal(checkpointName(s.id), body)
	if err != nil {
		w.log.Error("seal session checkpoint", "session", s.id, "err", err)
		return
	}
	if len(sealed) > maxCheckpointBytes {
		w.log.Warn("session checkpoint too large; not written", "session", s.id, "bytes", len(sealed), "max", maxCheckpointBytes)
		return
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if _, err := ck.kv.Put(pctx, s.id, sealed); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("write session checkpoint", "session", s.id, "err", err)
		}
		return
	}
	ck.mu.Lock()
	ck.written[s.id] = written{sum: sum, at: now, seen: now}
	ck.mu.Unlock()
	checkpointsWritten.WithLabelValues(w.cfg.ID).Inc() // metrics.go
}

// checkpointName binds a sealed checkpoint to its session id, so that a
// record copied under another key does not open.
func checkpointName(id string) string { return "browser-checkpoint/" + id }

// storageScript reads the origin and local storage of a page; a page
// whose storage is denied (opaque origin, about:blank) answers none.
const storageScript = `(() => {
  let items = [];
  try { for (let i = 0; i < localStorage.length; i++) { const k = localStorage.key(i); items.push([k, localStorage.getItem(k)]); } } catch (e) {}
  return JSON.stringify({origin: location.origin, items});
})()`

// capture reads the session's state; the caller holds its lock.
func (s *session) capture(ctx context.Context) (*checkpoint, error) {
	if s.ctx.Err() != nil {
		return nil, errors.New("the session is closing")
	}
	cp := &checkpoint{Session: s.id, Owner: s.owner, Profile: s.profile, Pubkey: s.pubkey, Active: s.active, Tabs: make([]string, 0, len(s.tabs))}
	if !s.emu.IsZero() {
		e := s.emu
		cp.Emulation = &e
	}
	bctx, cancel := within(s.browser, ctx)
	defer cancel()
	cookies, err := chromedp.CallBrowser(bctx, storage.GetCookies, storage.GetCookiesParams{BrowserContextID: s.bcid})
	if err != nil {
		return nil, fmt.Errorf("read cookies: %w", err)
	}
	cp.Cookies = cookies.Cookies
	seen := map[string]bool{}
	for _, t := range s.tabs {
		if t.page.Closed() {
			continue
		}
		u, err := t.page.URL(ctx)
		if err != nil {
			return nil, fmt.Errorf("read a tab's url: %w", err)
		}
		cp.Tabs = append(cp.Tabs, u)
		if !strings.HasPrefix(u, "http:") && !strings.HasPrefix(u, "https:") {
			continue
		}
		tctx, tcancel := within(t.ctx, ctx)
		raw, err := chromedp.Run(tctx, chromedp.Evaluate[string](storageScript))
		tcancel()
		if err != nil {
			continue // navigating, or the renderer is busy: next time
		}
		var st originStorage
		if json.Unmarshal([]byte(raw), &st) != nil || st.Origin == "" || st.Origin == "null" || seen[st.Origin] || len(st.Items) == 0 {
			continue
		}
		seen[st.Origin] = true
		cp.Storage = append(cp.Storage, st)
	}
	if cp.Active >= len(cp.Tabs) {
		cp.Active = max(len(cp.Tabs)-1, 0)
	}
	return cp, nil
}

// loadCheckpoint reads and opens the checkpoint of session id.
func (w *Worker) loadCheckpoint(ctx context.Context, id string) (*checkpoint, uint64, error) {
	if w.ckpt == nil {
		return nil, 0, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND,
			"browser worker %s keeps no session checkpoints (it has no operator secret key), so session %s cannot be restored here", w.cfg.ID, id)
	}
	e, err := w.ckpt.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, bus.Errorf(commonv1.ErrorCode_SESSION_NOT_FOUND,
			"browser session %s has no checkpoint (closed normally, restored already, never checkpointed, or older than %s)", id, w.cfg.CheckpointTTL)
	}
	if err != nil {
		return nil, 0, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "read the checkpoint of browser session %s: %v", id, err)
	}
	body, err := w.cfg.SecretKey.Open(checkpointName(id), e.Value())
	if err != nil {
		return nil, 0, bus.Errorf(commonv1.ErrorCode_INTERNAL, "open the checkpoint of browser session %s (sealed with another operator key?): %v", id, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(body, &cp); err != nil {
		return nil, 0, bus.Errorf(commonv1.ErrorCode_INTERNAL, "decode the checkpoint of browser session %s: %v", id, err)
	}
	return &cp, e.Revision(), nil
}

// restore opens a new session from the checkpoint of a lost one.
func (w *Worker) restore(ctx context.Context, req *browserv1.RestoreSessionRequest) (*browserv1.OpenSessionResponse, error) {
	old := req.GetOldSessionId()
	if old == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "restore names no session")
	}
	cp, rev, err := w.loadCheckpoint(ctx, old)
	if err != nil {
		return nil, err
	}
	owner := req.GetOwner()
	if owner == "" {
		owner = cp.Owner
	}
	res, err := w.openWith(ctx, &browserv1.OpenSessionRequest{Owner: owner, Policy: req.GetPolicy(), Profile: cp.Profile},
		func(ctx context.Context, s *session) error { return s.apply(ctx, cp, w.pageOptions()) })
	if err != nil {
		return nil, err
	}
	// The new session holds the state now and checkpoints under its own
	// id; the old record goes, unless it changed meanwhile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.ckpt.kv.Delete(dctx, old, jetstream.LastRevision(rev)); err != nil {
		w.log.Warn("delete the restored session's checkpoint", "session", old, "err", err)
	}
	w.log.InfoContext(ctx, "session restored", "session", res.GetSessionId(), "from", old, "from_worker", cp.Worker,
		"tabs", len(cp.Tabs), "cookies", len(cp.Cookies), "checkpoint_age", time.Since(cp.Time).Round(time.Millisecond).String())
	return res, nil
}

// apply puts a checkpoint into a session just started (one blank tab):
// cookies first, then each tab at its URL with its origin's local storage
// in place before the page's scripts run. A tab that fails to load stays
// open on its error page or blank: the restore itself succeeds.
func (s *session) apply(ctx context.Context, cp *checkpoint, opts page.Options) error {
	if len(cp.Cookies) > 0 {
		bctx, cancel := within(s.browser, ctx)
		_, err := chromedp.CallBrowser(bctx, storage.SetCookies, storage.SetCookiesParams{Cookies: cookieParams(cp.Cookies), BrowserContextID: s.bcid})
		cancel()
		if err != nil {
			return fmt.Errorf("restore cookies: %w", err)
		}
	}
	if cp.Emulation != nil {
		// The first tab is open already; newTab emulates in the others.
		if err := s.setEmulation(ctx, *cp.Emulation); err != nil {
			return fmt.Errorf("restore the emulation: %w", err)
		}
	}
	if cp.Pubkey != "" {
		// window.nostr in the pages before they load; the signer answers
		// for the new session once the gateway moved the identity to it.
		if _, err := s.setIdentity(ctx, cp.Pubkey); err != nil {
			return fmt.Errorf("restore the identity: %w", err)
		}
	}
	script, err := storageRestoreScript(cp.Storage)
	if err != nil {
		return err
	}
	for i, u := range cp.Tabs {
		var t *tab
		if i == 0 {
			t = s.tabs[0]
		} else {
			if t, err = s.newTab(ctx, "", opts); err != nil {
				return err
			}
			s.tabs = append(s.tabs, t)
		}
		if u == "" || u == "about:blank" {
			continue
		}
		tctx, cancel := within(t.ctx, ctx)
		var added cdppage.AddScriptToEvaluateOnNewDocumentResult
		if script != "" {
			if added, err = chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
				cancel()
				return fmt.Errorf("prepare local storage: %w", err)
			}
		}
		_, _ = t.page.Do(ctx, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: u}}})
		if script != "" {
			_, _ = chromedp.Call(tctx, cdppage.RemoveScriptToEvaluateOnNewDocument, cdppage.RemoveScriptToEvaluateOnNewDocumentParams(added))
		}
		cancel()
		if ctx.Err() != nil {
			return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "restoring the session's tabs did not finish before the deadline")
		}
	}
	s.active = min(max(cp.Active, 0), len(s.tabs)-1)
	tctx, cancel := within(s.tabs[s.active].ctx, ctx)
	defer cancel()
	_, _ = chromedp.CallBrowser(tctx, target.ActivateTarget, target.ActivateTargetParams{TargetID: s.tabs[s.active].id})
	return nil
}

// cookieParams turns cookies read with Storage.getCookies into what
// Storage.setCookies takes. A host-only cookie (a domain without a leading
// dot) is set by URL, so that it stays host-only.
func cookieParams(cookies []*network.Cookie) []*network.CookieParam {
	out := make([]*network.CookieParam, 0, len(cookies))
	for _, c := range cookies {
		p := &network.CookieParam{Name: c.Name, Value: c.Value, Path: c.Path, Secure: c.Secure, HTTPOnly: c.HTTPOnly,
			SameSite: c.SameSite, Priority: c.Priority, SourceScheme: c.SourceScheme, SourcePort: c.SourcePort, PartitionKey: c.PartitionKey}
		if !c.Session && c.Expires > 0 {
			p.Expires = cdp.TimeSinceEpoch(c.Expires)
		}
		if strings.HasPrefix(c.Domain, ".") {
			p.Domain = c.Domain
		} else {
			scheme := "http"
			if c.Secure {
				scheme = "https"
			}
			p.URL = (&url.URL{Scheme: scheme, Host: c.Domain, Path: c.Path}).String()
		}
		out = append(out, p)
	}
	return out
}

// storageRestoreScript is a script that puts back the local storage of
// the page's origin, for Page.addScriptToEvaluateOnNewDocument; "" when
// there is none to put back.
func storageRestoreScript(st []originStorage) (string, error) {
	if len(st) == 0 {
		return "", nil
	}
	byOrigin := make(map[string][][2]string, len(st))
	for _, o := range st {
		byOrigin[o.Origin] = o.Items
	}
	data, err := json.Marshal(byOrigin)
	if err != nil {
		return "", fmt.Errorf("encode local storage: %w", err)
	}
	return `(() => { const items = (` + string(data) + `)[location.origin]; if (!items) return;
  try { for (const [k, v] of items) localStorage.setItem(k, v); } catch (e) {} })()`, nil
}
