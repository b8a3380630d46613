package gateway

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Capacity is never lost to the absent, and no caller takes the whole
// fleet:
//
//   - An MCP session (2025) whose client sent no request and held no
//     stream for --mcp-idle-timeout, and a handle (2026) unused for
//     --handle-idle-timeout, gives its browser session back. The MCP
//     session or handle itself lives on: its next browser call opens a
//     fresh browser session.
//   - A caller (a token, an OAuth subject, or anonymous as one caller) has
//     at most --sessions-per-caller browser sessions (a token may set its
//     own), however many calls open them at once on however many
//     replicas: taking a slot is a compare-and-set in KV (takeSlot,
//     state.Store.Reserve). Past it, its own longest-idle session idle
//     for reclaimOwnIdle is given back, or the call is refused, naming
//     the limit.
//   - When every worker is full, a new browser session first reclaims the
//     caller's own idle sessions, then the longest-idle one of anybody
//     idle beyond --reclaim-grace; only then does the caller hear "no
//     browser capacity".
//
// Every gateway knows when its clients last used their sessions; it
// writes that back into the session records every few seconds (not per
// call), and every gateway's keeper gives back the sessions idle past
// their timeout. Two keepers racing on one record both write at its
// revision: one wins. Each give-back is an audit record.

// Defaults of the session limits.
const (
	DefaultMCPIdleTimeout    = time.Minute
	DefaultHandleIdleTimeout = 10 * time.Minute
	DefaultSessionsPerCaller = 8
	DefaultReclaimGrace      = 30 * time.Second
	// reclaimOwnIdle is how long a caller's own session must have been
	// idle to be given back for its next one (its parallel agents keep
	// theirs).
	reclaimOwnIdle = 10 * time.Second
)

// SessionsConfig is the browser sessions' limits (reclaim.go).
type SessionsConfig struct {
	// MCPIdleTimeout releases the browser session of an MCP session with
	// no request and no open stream for that long.
	MCPIdleTimeout time.Duration
	// HandleIdleTimeout releases the browser session of a handle unused
	// for that long.
	HandleIdleTimeout time.Duration
	// SessionsPerCaller bounds one caller's browser sessions (a token's
	// own limit wins).
	SessionsPerCaller int
	// ReclaimGrace is how long another caller's session must be idle
	// before a full fleet takes it back for a new one.
	ReclaimGrace time.Duration
	// OpenQueue is how many calls may wait for a browser session when
	// the fleet is full and nothing can be reclaimed (openqueue.go); 0:
	// none wait, they hear "no browser capacity" at once.
	OpenQueue int
	// OpenQueueTimeout is how long a queued call waits at most.
	OpenQueueTimeout time.Duration
}

// registerSessionFlags adds the session limits' flags.
func registerSessionFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.DurationVar(&cfg.MCPIdleTimeout, "mcp-idle-timeout", config.MustDuration(errs, "SOVEREIGN_MCP_IDLE_TIMEOUT", DefaultMCPIdleTimeout),
		"an MCP session with no request and no open stream for this long gives its browser session back [SOVEREIGN_MCP_IDLE_TIMEOUT]")
	fs.DurationVar(&cfg.HandleIdleTimeout, "handle-idle-timeout", config.MustDuration(errs, "SOVEREIGN_HANDLE_IDLE_TIMEOUT", DefaultHandleIdleTimeout),
		"a session handle (2026 clients) unused for this long gives its browser session back [SOVEREIGN_HANDLE_IDLE_TIMEOUT]")
	fs.IntVar(&cfg.SessionsPerCaller, "sessions-per-caller", config.MustInt(errs, "SOVEREIGN_SESSIONS_PER_CALLER", DefaultSessionsPerCaller),
		"browser sessions one caller (token, OAuth subject, or all anonymous clients together) may hold; a token's --max-sessions wins [SOVEREIGN_SESSIONS_PER_CALLER]")
	fs.DurationVar(&cfg.ReclaimGrace, "reclaim-grace", config.MustDuration(errs, "SOVEREIGN_RECLAIM_GRACE", DefaultReclaimGrace),
		"when every worker is full, another caller's browser session idle this long is given back for a new one [SOVEREIGN_RECLAIM_GRACE]")
	fs.IntVar(&cfg.OpenQueue, "open-queue", config.MustInt(errs, "SOVEREIGN_OPEN_QUEUE", 0),
		"calls that may wait, in order, for a browser session when every worker is full and none can be reclaimed; 0: none wait [SOVEREIGN_OPEN_QUEUE]")
	fs.DurationVar(&cfg.OpenQueueTimeout, "open-queue-timeout", config.MustDuration(errs, "SOVEREIGN_OPEN_QUEUE_TIMEOUT", DefaultOpenQueueTimeout),
		"how long a call waits at most in the open queue (and never past the tool timeout) [SOVEREIGN_OPEN_QUEUE_TIMEOUT]")
}

// withDefaults fills the zero limits.
func (c SessionsConfig) withDefaults() SessionsConfig {
	if c.MCPIdleTimeout == 0 {
		c.MCPIdleTimeout = DefaultMCPIdleTimeout
	}
	if c.HandleIdleTimeout == 0 {
		c.HandleIdleTimeout = DefaultHandleIdleTimeout
	}
	if c.SessionsPerCaller == 0 {
		c.SessionsPerCaller = DefaultSessionsPerCaller
	}
	if c.ReclaimGrace == 0 {
		c.ReclaimGrace = DefaultReclaimGrace
	}
	if c.OpenQueueTimeout == 0 {
		c.OpenQueueTimeout = DefaultOpenQueueTimeout
	}
	return c
}

// validate checks the limits (zero takes the default).
func (c SessionsConfig) validate(bad func(flag, format string, a ...any)) {
	if c.MCPIdleTimeout != 0 && c.MCPIdleTimeout < time.Second {
		bad("mcp-idle-timeout", "%s must be at least 1s", c.MCPIdleTimeout)
	}
	if c.HandleIdleTimeout != 0 && c.HandleIdleTimeout < time.Second {
		bad("handle-idle-timeout", "%s must be at least 1s", c.HandleIdleTimeout)
	}
	if c.SessionsPerCaller < 0 {
		bad("sessions-per-caller", "%d must be at least 1", c.SessionsPerCaller)
	}
	if c.ReclaimGrace < 0 {
		bad("reclaim-grace", "%s must not be negative", c.ReclaimGrace)
	}
	if c.OpenQueue < 0 || c.OpenQueue > 10000 {
		bad("open-queue", "%d must be from 0 (no queue) to 10000", c.OpenQueue)
	}
	if c.OpenQueueTimeout < 0 || c.OpenQueueTimeout > time.Hour {
		bad("open-queue-timeout", "%s must be from 0 (the default) to 1h", c.OpenQueueTimeout)
	}
}

// usage is what this gateway saw of its clients since the keeper last
// wrote it back: calls per record key, and open streams.
type usage struct {
	mu      sync.Mutex
	used    map[string]time.Time
	streams map[string]int
}

func newUsage() *usage { return &usage{used: map[string]time.Time{}, streams: map[string]int{}} }

// touch notes a call on the record of key.
func (u *usage) touch(key string) {
	u.mu.Lock()
	u.used[key] = time.Now()
	u.mu.Unlock()
}

// stream notes an open stream on the record of key until the returned func.
func (u *usage) stream(key string) (end func()) {
	u.mu.Lock()
	u.streams[key]++
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		if u.streams[key]--; u.streams[key] <= 0 {
			delete(u.streams, key)
		}
		u.used[key] = time.Now()
		u.mu.Unlock()
	}
}

// take returns the uses to write back and forgets them; a record with an
// open stream is in use now.
func (u *usage) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.used
	u.used = make(map[string]time.Time, len(out))
	now := time.Now()
	for k := range u.streams {
		out[k] = now
	}
	return out
}

// lastUse is when this gateway last saw the record of key in use (now
// while it has a stream open), zero when it has nothing newer than the
// record itself.
func (u *usage) lastUse(key string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.streams[key] > 0 {
		return time.Now()
	}
	return u.used[key]
}

// idle is how long the record of slot s has been unused, as far as this
// gateway knows.
func (g *Gateway) idle(s state.Slot, now time.Time) time.Duration {
	last := s.LastUse()
	if t := g.usage.lastUse(s.Key); t.After(last) {
		last = t
	}
	return now.Sub(last)
}

// keeperEvery is how often the keeper writes uses back and gives back idle
// sessions: a fraction of the shortest idle timeout.
func (c SessionsConfig) keeperEvery() time.Duration {
	return min(max(min(c.MCPIdleTimeout, c.HandleIdleTimeout)/4, 250*time.Millisecond), 10*time.Second)
}

// startKeeper runs the keeper until Close.
func (g *Gateway) startKeeper(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(g.cfg.keeperEvery())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				g.keep(ctx)
			}
		}
	}()
	g.onClose(func(context.Context) error { cancel(); <-done; return nil })
	return nil
}

// keep writes this gateway's uses back, then gives back the browser
// sessions idle past their timeout.
func (g *Gateway) keep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for k, t := range g.usage.take() {
		if err := g.store.MarkUsed(ctx, k, t); err != nil {
			g.log.DebugContext(ctx, "write back a session's use", "err", err)
		}
	}
	now := time.Now()
	for _, s := range g.store.Bound() {
		limit := g.cfg.HandleIdleTimeout
		if s.Kind == state.MCP {
			limit = g.cfg.MCPIdleTimeout
		}
		idle := g.idle(s, now)
		if idle < limit {
			continue
		}
		g.release(ctx, s, fmt.Sprintf("unused for %s (the %s idle timeout is %s)", idle.Round(time.Second), kindLabel(s.Kind), limit))
	}
}

func kindLabel(k state.Kind) string {
	if k == state.MCP {
		return "MCP session"
	}
	return "session handle"
}

// release gives back slot's browser session (unless its record changed
// meanwhile) and records why in the audit trail and the log.
func (g *Gateway) release(ctx context.Context, s state.Slot, why string) bool {
	ok, err := g.store.Release(ctx, s, why)
	if err != nil {
		g.log.WarnContext(ctx, "give back a browser session", "err", err)
		return false
	}
	if !ok {
		return false // used or released meanwhile
	}
	g.closeSession(ctx, s.WorkerID, s.SessionID)
	g.log.InfoContext(ctx, "browser session given back", "worker", s.WorkerID, "session", s.SessionID,
		"owner", dispatch.CallerLabel(s.Owner), "why", why)
	g.audit.Publish(audit.Record{
		Start:          time.Now(),
		Caller:         "gateway",
		BrowserSession: s.SessionID,
		Tool:           "session.release",
		Arguments:      []byte("{}"),
		Result:         fmt.Sprintf("the browser session of %s %s was closed: %s", kindLabel(s.Kind), dispatch.CallerLabel(s.Owner), why),
		Outcome:        historyv1.Outcome_OUTCOME_OK,
	})
	return true
}

// idleOf lists the bound records that pass keep, longest idle first.
func (g *Gateway) idleOf(keep func(state.Slot, time.Duration) bool) []state.Slot {
	now := time.Now()
	var out []state.Slot
	idle := map[string]time.Duration{}
	for _, s := range g.store.Bound() {
		if d := g.idle(s, now); keep(s, d) {
			out = append(out, s)
			idle[s.Key] = d
		}
	}
	slices.SortFunc(out, func(a, b state.Slot) int { return cmp.Compare(idle[b.Key], idle[a.Key]) })
	return out
}

// takeSlot takes one of caller's browser session slots for the record of
// kind and id, atomically across the gateway replicas
// (state.Store.Reserve): past the caller's limit it gives back the
// caller's longest-idle session, or refuses. newHandle says the call named
// no session (a 2026 client that forgot its handle mints one per call).
// release gives the reservation back once the record holds the session.
func (g *Gateway) takeSlot(ctx context.Context, kind state.Kind, id string, caller Caller, newHandle bool) (release func(), err error) {
	limit := g.cfg.SessionsPerCaller
	if caller.MaxSessions > 0 {
		limit = caller.MaxSessions
	}
	// The reservation covers the open, a wait in the open queue and the
	// record's write; a gateway that dies meanwhile frees it then.
	hold := g.cfg.ToolTimeout + g.cfg.OpenQueueTimeout + time.Minute
	key := state.KeyOf(kind, id)
	var le *state.LimitError
	for {
		release, err := g.store.Reserve(ctx, caller.ID, key, limit, hold)
		if !errors.As(err, &le) {
			return release, err
		}
		if !g.releaseOwnIdle(ctx, caller.ID, limit) {
			break
		}
	}
	hint := "end a session you no longer use (an MCP client's DELETE), or wait until one has been idle for " + reclaimOwnIdle.String()
	if newHandle {
		hint = fmt.Sprintf("this call named no session, so it would open another: pass the handle an earlier result gave (session: %s…) as %q to keep using that session",
			state.HandlePrefix, "session")
	}
	return nil, toolErr("this caller already holds %d browser sessions, its limit (the gateway's --sessions-per-caller, or its token's --max-sessions), "+
		"all in use within the last %s; %s", le.Held, reclaimOwnIdle, hint)
}

// releaseOwnIdle gives back the longest-idle browser session of caller
// idle for reclaimOwnIdle, for its next one; false when there is none.
func (g *Gateway) releaseOwnIdle(ctx context.Context, caller string, limit int) bool {
	for _, s := range g.idleOf(func(s state.Slot, idle time.Duration) bool { return s.Owner == caller && idle >= reclaimOwnIdle }) {
		if g.release(ctx, s, fmt.Sprintf("its caller is at its limit of %d browser sessions and opened another", limit)) {
			return true
		}
	}
	return false
}

// reclaim gives back one browser session for caller when every worker is
// full: the caller's own longest-idle one, else anybody's idle beyond the
// grace period. It reports whether one was given back.
func (g *Gateway) reclaim(ctx context.Context, caller string) bool {
	for _, pass := range []func(state.Slot, time.Duration) bool{
		func(s state.Slot, idle time.Duration) bool { return s.Owner == caller && idle >= reclaimOwnIdle },
		func(s state.Slot, idle time.Duration) bool { return idle >= g.cfg.ReclaimGrace },
	} {
		for _, s := range g.idleOf(pass) {
			if g.release(ctx, s, "every worker was full and a caller needed a new browser session") {
				return true
			}
		}
	}
	return false
}

// openSession opens a browser session for caller's record of kind and id,
// taking one of the caller's slots first (its own limit) and reclaiming an
// idle session when the fleet is full. Call release once the record holds
// the session, or it will not be used (the slot is then free again). A
// call that waits in the open queue tells progress its place.
func (g *Gateway) openSession(ctx context.Context, progress dispatch.Progress, kind state.Kind, id string, caller Caller, profile string, newHandle bool) (worker, session string, release func(), err error) {
	release, err = g.takeSlot(ctx, kind, id, caller, newHandle)
	if err != nil {
		return "", "", nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	open := func() (worker, session string, err error) {
		for range 3 {
			worker, session, err = g.fleet.Open(ctx, workerOwner(kind, caller.ID), g.policy.forCaller(caller, nil), profile)
			var ce *fleet.CapacityError
			if !errors.As(err, &ce) || !g.reclaim(ctx, caller.ID) {
				return worker, session, err
			}
		}
		return worker, session, err
	}
	worker, session, err = open()
	var ce *fleet.CapacityError
	if errors.As(err, &ce) && g.cfg.OpenQueue > 0 {
		worker, session, err = g.waitForRoom(ctx, progress, ce, open) // openqueue.go
	}
	return worker, session, release, err
}
