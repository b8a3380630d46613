package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/identity"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
)

// CallerID returns the identity a request's session state is bound to: the
// ID of the [Caller] that authentication put in its context
// ("token:<id>", "oauth:<digest>"), or [Anonymous].
func CallerID(r *http.Request) string { return identity.From(r.Context()).ID }

// withCaller carries the request's caller into the MCP handlers' context.
func withCaller(ctx context.Context, r *http.Request) context.Context {
	return identity.With(ctx, identity.From(r.Context()))
}

// sessionManagers resolves mcp-go's SessionIdManager per request, bound to
// the request's caller and context, backed by the KV store: any replica
// validates and terminates any session.
type sessionManagers struct {
	store *state.Store
	fleet *fleet.Fleet
	log   *slog.Logger
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver. A nil
// request comes from the transport's own housekeeping (idle sweep,
// shutdown): that one only drops this replica's local state and never ends
// the shared session.
func (m *sessionManagers) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return localOnly{}
	}
	return m.manager(r)
}

func (m *sessionManagers) manager(r *http.Request) *kvSessions {
	return &kvSessions{m: m, ctx: r.Context(), caller: CallerID(r)}
}

// localOnly is the manager for housekeeping without a request.
type localOnly struct{}

func (localOnly) Generate() string               { return state.NewSessionID() }
func (localOnly) Validate(string) (bool, error)  { return false, nil }
func (localOnly) Terminate(string) (bool, error) { return false, nil }

// kvTimeout bounds one session-state operation of a request.
const kvTimeout = 5 * time.Second

// kvSessions is the SessionIdManager of one request.
type kvSessions struct {
	m      *sessionManagers
	ctx    context.Context
	caller string
}

var errUnknownSession = errors.New("unknown MCP session")

// Generate mints a session id and stores its record. The interface has no
// error: a failed write is logged, and the client's next request gets 404
// and initializes again.
func (k *kvSessions) Generate() string {
	id := state.NewSessionID()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), kvTimeout)
	defer cancel()
	if _, err := k.m.store.Create(ctx, state.MCP, id, state.Record{Owner: k.caller}); err != nil {
		k.m.log.ErrorContext(ctx, "store new MCP session", "err", err)
	}
	return id
}

// Validate reports a live session of this caller as (false, nil), a
// terminated one as (true, nil) and anything else as an error (404).
func (k *kvSessions) Validate(id string) (bool, error) {
	if !state.ValidID(id) {
		return false, errUnknownSession
	}
	ctx, cancel := context.WithTimeout(k.ctx, kvTimeout)
	defer cancel()
	e, err := k.m.store.Get(ctx, state.MCP, id)
	if err != nil {
		if !errors.Is(err, state.ErrNotFound) {
			k.m.log.WarnContext(ctx, "read MCP session", "err", err)
		}
		return false, errUnknownSession
	}
	if e.Owner != k.caller {
		// Another credential's session: as unknown as a made-up one.
		return false, errUnknownSession
	}
	if e.Terminated {
		return true, nil
	}
	// Refresh the TTL now and then; a conflict means someone just wrote it.
	if time.Since(e.Touched) > min(time.Minute, k.m.store.TTL()/8) {
		_, _ = k.m.store.Update(ctx, e)
	}
	return false, nil
}

// Terminate marks the session terminated for every replica and closes its
// browser session.
func (k *kvSessions) Terminate(id string) (bool, error) {
	if !state.ValidID(id) {
		return false, errUnknownSession
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.ctx), kvTimeout)
	defer cancel()
	var worker, session string
	_, err := k.m.store.Modify(ctx, state.MCP, id, func(r *state.Record) bool {
		if r.Owner != k.caller || r.Terminated {
			return false
		}
		worker, session = r.WorkerID, r.SessionID
		r.Terminated, r.WorkerID, r.SessionID = true, "", ""
		return true
	})
	if errors.Is(err, state.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("terminate MCP session: %w", err)
	}
	if worker != "" {
		if err := k.m.fleet.Close(ctx, worker, session); err != nil {
			k.m.log.InfoContext(ctx, "close browser session of ended MCP session", "err", err)
		}
	}
	return false, nil
}
