// Package fleet talks to the browser workers over the bus: it opens
// sessions on any worker with capacity, restores a lost session from its
// checkpoint, runs tools on the worker that holds a session (noticing at
// once when that worker dies), closes sessions, and counts the workers
// when none can take a session.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// WorkerService is the micro service name every browser worker registers.
const WorkerService = browserbus.WorkerService

// DefaultLiveness is how often a running call checks that its worker is
// still there.
const DefaultLiveness = 300 * time.Millisecond

// openAttempts bounds retries on the open queue group when a worker that
// raced to full answers NO_CAPACITY; maxPlaceTries bounds every attempt of
// one open, direct ones included.
const (
	openAttempts  = 4
	maxPlaceTries = 12
)

// Fleet is the gateway's view of the browser workers.
type Fleet struct {
	c        *bus.Conn
	liveness time.Duration
	loads    *loads // the workers' headroom (place.go)
}

// New returns a fleet client on c; liveness <= 0 means DefaultLiveness.
// It follows the workers' load reports (sov.browser.load) for as long as
// c is open, to place new sessions (place.go).
func New(c *bus.Conn, liveness time.Duration) *Fleet {
	if liveness <= 0 {
		liveness = DefaultLiveness
	}
	return &Fleet{c: c, liveness: liveness, loads: watchLoads(c)}
}

// CapacityError says that no worker could take a new session, and how the
// fleet looked at that moment.
type CapacityError struct {
	Census Census
	Err    error // the last bus error
}

func (e *CapacityError) Error() string {
	c := e.Census
	switch {
	case c.Workers == 0:
		return "no browser workers are running: start one (`sovereign browser`, or scale the browser deployment up) and retry"
	case c.MaxSessions > 0 && c.Sessions < c.MaxSessions:
		return fmt.Sprintf("no browser worker can take a session right now (%d %s, %d of %d sessions in use: a worker may be restarting its browser); retry in a few seconds",
			c.Workers, plural(c.Workers, "worker", "workers"), c.Sessions, c.MaxSessions)
	case c.MaxSessions > 0:
		return fmt.Sprintf("no browser capacity: every worker is at its session limit (%d %s, %d of %d sessions in use); "+
			"retry later, end idle sessions, or add browser workers", c.Workers, plural(c.Workers, "worker", "workers"), c.Sessions, c.MaxSessions)
	default:
		return fmt.Sprintf("no browser capacity: every worker is at its session limit (%d %s); retry later, end idle sessions, or add browser workers",
			c.Workers, plural(c.Workers, "worker", "workers"))
	}
}

func (e *CapacityError) Unwrap() error { return e.Err }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Open opens a browser session on a worker with free capacity. owner is an
// opaque label for the worker's logs. When no worker can take it, the error
// is a *CapacityError. policy is in force before the session's first tab
// loads anything.
func (f *Fleet) Open(ctx context.Context, owner string, policy *browserv1.UrlPolicy, profile string) (workerID, sessionID string, err error) {
	return f.place(ctx, "open", browserbus.Open.Subject(f.c),
		&browserv1.OpenSessionRequest{Owner: owner, Policy: policy, Profile: profile})
}

// Restore opens a new browser session from the last checkpoint of the
// session oldSessionID, which was lost (its worker or its Chromium died:
// a call on it failed with SESSION_LOST, or with UNAVAILABLE from a worker
// that is no longer Alive). The new session, on any worker with capacity,
// has the old one's cookies, the local storage of its tabs' origins, its
// tabs at their URLs and its active tab, on the same base profile; page
// state and snapshot refs are not kept. policy is the caller's current URL
// policy, in force before any tab reopens; owner as for Open.
//
// Errors: SESSION_NOT_FOUND (bus.CodeOf) when there is no checkpoint (the
// session closed normally, was restored already, its workers run without
// the operator secret key, or the checkpoint outlived its TTL): the
// session is gone for good. A *CapacityError when no worker can take it.
// A checkpoint restores once: the old id's checkpoint is deleted, and the
// new session checkpoints under its own id.
func (f *Fleet) Restore(ctx context.Context, oldSessionID, owner string, policy *browserv1.UrlPolicy) (workerID, sessionID string, err error) {
	return f.place(ctx, "restore", browserbus.Restore.Subject(f.c),
		&browserv1.RestoreSessionRequest{OldSessionId: oldSessionID, Owner: owner, Policy: policy})
}

// place sends req to the worker with the most headroom (on its own
// subject, verb being "open" or "restore"), or to the open queue group
// (subject) when no load is known; a worker that turns out full or gone
// is set aside and the next is tried. what names the operation in
// errors.
func (f *Fleet) place(ctx context.Context, what, subject string, req proto.Message) (workerID, sessionID string, err error) {
	verb := what
	queued := 0 // attempts on the queue group
	for tries := 0; tries < maxPlaceTries; tries++ {
		target, id := subject, f.loads.pick()
		if id != "" {
			target = browserbus.WorkerGroup(f.c, id) + "." + verb
		}
		var resp browserv1.OpenSessionResponse
		err = f.c.Request(ctx, target, req, &resp)
		if err == nil {
			if resp.GetWorkerId() == "" || resp.GetSessionId() == "" {
				return "", "", bus.Errorf(commonv1.ErrorCode_INTERNAL, "worker answered %s without a worker or session id", target)
			}
			return resp.GetWorkerId(), resp.GetSessionId(), nil
		}
		code := bus.CodeOf(err)
		if ctx.Err() != nil || (code != commonv1.ErrorCode_NO_CAPACITY && code != commonv1.ErrorCode_UNAVAILABLE) {
			return "", "", fmt.Errorf("%s browser session: %w", what, err)
		}
		if id != "" {
			// Full, under memory pressure, or gone since its last report:
			// not again until it reports room.
			f.loads.setAside(id)
			continue
		}
		queued++
		// UNAVAILABLE: no worker is in the open queue group, which means
		// none has room. NO_CAPACITY: the worker that answered filled up
		// meanwhile; another may still have room.
		if code == commonv1.ErrorCode_UNAVAILABLE || queued == openAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("%s browser session: %w", what, err)
		case <-time.After(time.Duration(queued) * 25 * time.Millisecond):
		}
	}
	noCapacityTotal.Inc() // metrics.go
	return "", "", &CapacityError{Census: f.Census(ctx), Err: err}
}

// Call runs req (whose SessionId is set) on workerID. While it runs, the
// worker's ping subject is checked every liveness interval, so a worker that
// dies mid-call fails the call with UNAVAILABLE within about that interval.
func (f *Fleet) Call(ctx context.Context, workerID string, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	w := browserbus.Of(workerID)
	return w.Call.Call(ctx, f.c, req, bus.WithLiveness(w.Ping.Subject(f.c), f.liveness))
}

// Alive reports whether workerID answers a ping within about a second
// (three tries): a worker that is only re-subscribing after a reconnect
// comes back within that; a dead one never does.
func (f *Fleet) Alive(ctx context.Context, workerID string) bool {
	for try := 0; try < 3 && ctx.Err() == nil; try++ {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		var resp browserv1.PingResponse
		err := f.c.Request(pctx, browserbus.Of(workerID).Ping.Subject(f.c), &browserv1.PingRequest{}, &resp)
		cancel()
		if err == nil {
			return true
		}
		if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return false
}

// Close ends a browser session on its worker.
func (f *Fleet) Close(ctx context.Context, workerID, sessionID string) error {
	var resp browserv1.CloseSessionResponse
	if err := f.c.Request(ctx, browserbus.Of(workerID).Close.Subject(f.c), &browserv1.CloseSessionRequest{SessionId: sessionID}, &resp); err != nil {
		return fmt.Errorf("close browser session %s on %s: %w", sessionID, workerID, err)
	}
	return nil
}

// Census is how many workers answered discovery and their load.
type Census struct {
	Workers int
	// Sessions and MaxSessions add up the workers that answered a ping.
	Sessions, MaxSessions int
}

// censusWindow bounds how long Census listens for workers; quiet ends it
// early once replies stop coming.
const (
	censusWindow = 500 * time.Millisecond
	censusQuiet  = 75 * time.Millisecond
)

// Census discovers the workers through the micro discovery subject
// ($SRV.PING.sovereign-browser) and pings each for its load. It is for error
// messages: it never fails, an unreachable fleet counts as empty.
func (f *Fleet) Census(ctx context.Context) Census {
	ids := f.discover(ctx)
	out := Census{Workers: len(ids)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, censusWindow)
			defer cancel()
			var resp browserv1.PingResponse
			if err := f.c.Request(pctx, browserbus.Of(id).Ping.Subject(f.c), &browserv1.PingRequest{}, &resp); err != nil {
				return
			}
			mu.Lock()
			out.Sessions += int(resp.GetSessions())
			out.MaxSessions += int(resp.GetMaxSessions())
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// discover collects the worker ids that answer the micro PING of the worker
// service. Discovery replies are JSON, not protobuf, and come from every
// instance, so this is the one place that uses the NATS connection itself.
func (f *Fleet) discover(ctx context.Context) []string {
	nc := f.c.NATS()
	subject, err := micro.ControlSubject(micro.PingVerb, WorkerService, "")
	if err != nil {
		return nil
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, censusWindow)
	defer cancel()
	seen := map[string]bool{}
	var ids []string
	wait := censusWindow
	for {
		mctx, mcancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(mctx)
		mcancel()
		if err != nil {
			return ids
		}
		if m.Header.Get("Status") == "503" { // no responders: no worker at all
			return ids
		}
		var ping micro.Ping
		if json.Unmarshal(m.Data, &ping) != nil {
			continue
		}
		id := ping.Metadata["worker_id"]
		if id == "" {
			id = ping.ID
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
		wait = censusQuiet
	}
}

// checkpointBucketSuffix names the workers' checkpoint bucket
// (services/browser/checkpoint.go: bus.BucketName(prefix, this)).
const checkpointBucketSuffix = "_browser_checkpoints"

// Forget deletes the checkpoint of browser session sessionID, for a
// session the gateway ends while its worker is gone (the worker deletes
// the checkpoints of the sessions it closes itself). A fleet without
// checkpoints, or a session without one, is not an error.
func (f *Fleet) Forget(ctx context.Context, sessionID string) error {
	js, err := jetstream.New(f.c.NATS())
	if err != nil {
		return fmt.Errorf("forget the checkpoint of %s: %w", sessionID, err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketName(f.c.Prefix(), checkpointBucketSuffix))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("forget the checkpoint of %s: %w", sessionID, err)
	}
	if err := kv.Purge(ctx, sessionID); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget the checkpoint of %s: %w", sessionID, err)
	}
	return nil
}
