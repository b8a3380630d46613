// Package capacity keeps the browser fleet's capacity for the callers who
// use it: capacity is never lost to the absent, and no caller takes the
// whole fleet:
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
//
// When nothing can be reclaimed, a call may wait in the open queue
// (queue.go). The Keeper does all of it; the gateway builds it in New and
// asks it for each new browser session (Open).
package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
)

// reclaimOwnIdle is how long a caller's own session must have been idle
// to be given back for its next one (its parallel agents keep theirs).
const reclaimOwnIdle = 10 * time.Second

// Config is the limits (the gateway's SessionsConfig, defaults filled).
type Config struct {
	// MCPIdleTimeout and HandleIdleTimeout give back the browser session
	// of an MCP session or a handle unused for that long.
	MCPIdleTimeout, HandleIdleTimeout time.Duration
	// SessionsPerCaller bounds one caller's browser sessions (a token's
	// own limit wins).
	SessionsPerCaller int
	// ReclaimGrace is how long another caller's session must be idle
	// before a full fleet takes it back for a new one.
	ReclaimGrace time.Duration
	// OpenQueue is how many calls may wait for a browser session (0:
	// none); OpenQueueTimeout how long each waits at most.
	OpenQueue        int
	OpenQueueTimeout time.Duration
	// Hold is how long a caller's slot is reserved while its session
	// opens (a gateway that dies meanwhile frees it then).
	Hold time.Duration
}

// Records is what the keeper needs of the session records
// (internal/state's Store).
type Records interface {
	Bound() []state.Slot
	MarkUsed(ctx context.Context, key string, at time.Time) error
	Release(ctx context.Context, s state.Slot, why string) (bool, error)
	Reserve(ctx context.Context, owner, key string, limit int, hold time.Duration) (release func(), err error)
}

// Browsers is what the keeper needs of the browser fleet
// (internal/fleet's Fleet).
type Browsers interface {
	Open(ctx context.Context, owner string, policy *browserv1.UrlPolicy, profile string) (worker, session string, err error)
	Close(ctx context.Context, worker, session string) error
}

// Keeper hands out and takes back the fleet's browser sessions.
type Keeper struct {
	cfg      Config
	records  Records
	browsers Browsers
	audit    dispatch.Publisher // a give-back's audit record
	log      *slog.Logger
	usage    *usage
	queue    *openQueue
}

// New returns a keeper; Start runs its background work.
func New(cfg Config, records Records, browsers Browsers, pub dispatch.Publisher, log *slog.Logger) *Keeper {
	return &Keeper{cfg: cfg, records: records, browsers: browsers, audit: pub, log: log,
		usage: newUsage(), queue: &openQueue{max: cfg.OpenQueue}}
}

// Touch notes a call on the record of key.
func (k *Keeper) Touch(key string) { k.usage.touch(key) }

// Stream notes the record of key in use until end: a long call, an open
// stream (neither given back by the keeper nor reclaimed meanwhile).
func (k *Keeper) Stream(key string) (end func()) { return k.usage.stream(key) }

// Waiting is how many calls wait in the open queue.
func (k *Keeper) Waiting() int { return k.queue.Len() }

// Request asks for a new browser session for a record.
type Request struct {
	// Kind and ID name the record the session is for.
	Kind state.Kind
	ID   string
	// Caller is whose session it is (its limit applies); Owner is the
	// owner its worker keeps; Policy its URL policy; Profile the base
	// profile it starts from ("" for none).
	Caller  dispatch.Caller
	Owner   string
	Policy  *browserv1.UrlPolicy
	Profile string
	// NewHandle says the call named no session (a 2026 client that forgot
	// its handle mints one per call).
	NewHandle bool
	// Progress hears the call's place while it waits in the open queue.
	Progress dispatch.Progress
}

// Open opens a browser session for r, taking one of the caller's slots
// first (its own limit) and reclaiming an idle session when the fleet is
// full, else waiting in the open queue. Call release once the record
// holds the session, or it will not be used (the slot is then free again).
func (k *Keeper) Open(ctx context.Context, r Request) (worker, session string, release func(), err error) {
	release, err = k.takeSlot(ctx, r.Kind, r.ID, r.Caller, r.NewHandle)
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
			worker, session, err = k.browsers.Open(ctx, r.Owner, r.Policy, r.Profile)
			var ce *fleet.CapacityError
			if !errors.As(err, &ce) || !k.reclaim(ctx, r.Caller.ID) {
				return worker, session, err
			}
		}
		return worker, session, err
	}
	worker, session, err = open()
	var ce *fleet.CapacityError
	if errors.As(err, &ce) && k.cfg.OpenQueue > 0 {
		worker, session, err = k.waitForRoom(ctx, r.Progress, ce, open) // queue.go
	}
	return worker, session, release, err
}

// Close gives back a browser session nobody will use.
func (k *Keeper) Close(ctx context.Context, worker, session string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := k.browsers.Close(ctx, worker, session); err != nil {
		k.log.InfoContext(ctx, "give back browser session", "err", err)
	}
}

// idle is how long the record of slot s has been unused, as far as this
// gateway knows.
func (k *Keeper) idle(s state.Slot, now time.Time) time.Duration {
	last := s.LastUse()
	if t := k.usage.lastUse(s.Key); t.After(last) {
		last = t
	}
	return now.Sub(last)
}

// every is how often the keeper writes uses back and gives back idle
// sessions: a fraction of the shortest idle timeout.
func (c Config) every() time.Duration {
	return min(max(min(c.MCPIdleTimeout, c.HandleIdleTimeout)/4, 250*time.Millisecond), 10*time.Second)
}

// Start runs the keeper until the returned stop.
func (k *Keeper) Start() (stop func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(k.cfg.every())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				k.keep(ctx)
			}
		}
	}()
	return func(context.Context) error { cancel(); <-done; return nil }
}

// keep writes this gateway's uses back, then gives back the browser
// sessions idle past their timeout.
func (k *Keeper) keep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for key, t := range k.usage.take() {
		if err := k.records.MarkUsed(ctx, key, t); err != nil {
			k.log.DebugContext(ctx, "write back a session's use", "err", err)
		}
	}
	now := time.Now()
	for _, s := range k.records.Bound() {
		limit := k.cfg.HandleIdleTimeout
		if s.Kind == state.MCP {
			limit = k.cfg.MCPIdleTimeout
		}
		idle := k.idle(s, now)
		if idle < limit {
			continue
		}
		k.release(ctx, s, fmt.Sprintf("unused for %s (the %s idle timeout is %s)", idle.Round(time.Second), kindLabel(s.Kind), limit))
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
func (k *Keeper) release(ctx context.Context, s state.Slot, why string) bool {
	ok, err := k.records.Release(ctx, s, why)
	if err != nil {
		k.log.WarnContext(ctx, "give back a browser session", "err", err)
		return false
	}
	if !ok {
		return false // used or released meanwhile
	}
	k.Close(ctx, s.WorkerID, s.SessionID)
	k.log.InfoContext(ctx, "browser session given back", "worker", s.WorkerID, "session", s.SessionID,
		"owner", dispatch.CallerLabel(s.Owner), "why", why)
	k.audit.Publish(audit.Record{
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
func (k *Keeper) idleOf(keep func(state.Slot, time.Duration) bool) []state.Slot {
	now := time.Now()
	var out []state.Slot
	idle := map[string]time.Duration{}
	for _, s := range k.records.Bound() {
		if d := k.idle(s, now); keep(s, d) {
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
// no session. release gives the reservation back once the record holds
// the session.
func (k *Keeper) takeSlot(ctx context.Context, kind state.Kind, id string, caller dispatch.Caller, newHandle bool) (release func(), err error) {
	limit := k.cfg.SessionsPerCaller
	if caller.MaxSessions > 0 {
		limit = caller.MaxSessions
	}
	key := state.KeyOf(kind, id)
	var le *state.LimitError
	for {
		release, err := k.records.Reserve(ctx, caller.ID, key, limit, k.cfg.Hold)
		if !errors.As(err, &le) {
			return release, err
		}
		if !k.releaseOwnIdle(ctx, caller.ID, limit) {
			break
		}
	}
	hint := "end a session you no longer use (an MCP client's DELETE), or wait until one has been idle for " + reclaimOwnIdle.String()
	if newHandle {
		hint = fmt.Sprintf("this call named no session, so it would open another: pass the handle an earlier result gave (session: %s…) as %q to keep using that session",
			state.HandlePrefix, "session")
	}
	return nil, dispatch.ToolErrorf("this caller already holds %d browser sessions, its limit (the gateway's --sessions-per-caller, or its token's --max-sessions), "+
		"all in use within the last %s; %s", le.Held, reclaimOwnIdle, hint)
}

// releaseOwnIdle gives back the longest-idle browser session of caller
// idle for reclaimOwnIdle, for its next one; false when there is none.
func (k *Keeper) releaseOwnIdle(ctx context.Context, caller string, limit int) bool {
	for _, s := range k.idleOf(func(s state.Slot, idle time.Duration) bool { return s.Owner == caller && idle >= reclaimOwnIdle }) {
		if k.release(ctx, s, fmt.Sprintf("its caller is at its limit of %d browser sessions and opened another", limit)) {
			return true
		}
	}
	return false
}

// reclaim gives back one browser session for caller when every worker is
// full: the caller's own longest-idle one, else anybody's idle beyond the
// grace period. It reports whether one was given back.
func (k *Keeper) reclaim(ctx context.Context, caller string) bool {
	for _, pass := range []func(state.Slot, time.Duration) bool{
		func(s state.Slot, idle time.Duration) bool { return s.Owner == caller && idle >= reclaimOwnIdle },
		func(s state.Slot, idle time.Duration) bool { return idle >= k.cfg.ReclaimGrace },
	} {
		for _, s := range k.idleOf(pass) {
			if k.release(ctx, s, "every worker was full and a caller needed a new browser session") {
				return true
			}
		}
	}
	return false
}
