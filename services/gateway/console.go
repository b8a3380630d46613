package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

// DefaultAdminListen is where the operator console listens when an admin
// token is set and --admin-listen is not.
const DefaultAdminListen = "127.0.0.1:8086"

// consoleURLTimeout bounds the get_url call that shows a session's page in
// the console; a session busy with a call shows as "busy".
const consoleURLTimeout = time.Second

// admin is the operator console of a gateway: its handler (nil without an
// admin token) and, while ServeListener runs, the address it serves on.
type admin struct {
	handler http.Handler
	addr    atomic.Pointer[string] // "http://host:port/" while serving
}

// adminToken returns the configured admin token: SOVEREIGN_ADMIN_TOKEN
// (Config.AdminToken) or the first line of --admin-token-file; "" when
// neither is set.
func (c Config) adminToken() (string, error) {
	if c.AdminTokenFile == "" {
		return c.AdminToken, nil
	}
	if c.AdminToken != "" {
		return "", errors.New("--admin-token-file: SOVEREIGN_ADMIN_TOKEN is set too; use one or the other")
	}
	data, err := os.ReadFile(c.AdminTokenFile)
	if err != nil {
		return "", fmt.Errorf("--admin-token-file: %w", err)
	}
	tok, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(tok), nil
}

// validateAdmin checks the console's settings (part of Config.Validate).
func (c Config) validateAdmin() []error {
	var errs []error
	tok, err := c.adminToken()
	if err != nil {
		errs = append(errs, err)
	} else if tok != "" && len(tok) < console.MinTokenLen {
		errs = append(errs, fmt.Errorf("SOVEREIGN_ADMIN_TOKEN: the admin token has %d characters; it needs at least %d (generate one with `openssl rand -hex 32`)",
			len(tok), console.MinTokenLen))
	} else if tok != strings.TrimSpace(tok) {
		errs = append(errs, errors.New("SOVEREIGN_ADMIN_TOKEN: the admin token starts or ends with white space; remove it"))
	}
	for _, a := range []struct{ flag, v string }{{"--admin-listen", c.AdminListen}, {"--admin-published", c.AdminPublished}} {
		if a.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.v); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port (like %s)", a.flag, a.v, DefaultAdminListen))
		}
	}
	return errs
}

// adminListen is the console's address: --admin-listen or the default.
func (c Config) adminListen() string {
	if c.AdminListen == "" {
		return DefaultAdminListen
	}
	return c.AdminListen
}

// setupConsole builds the operator console when an admin token is set.
// Without one the admin routes do not exist at all.
func (g *Gateway) setupConsole() error {
	tok, err := g.cfg.adminToken()
	if err != nil {
		return err
	}
	if tok == "" {
		if g.cfg.AdminListen != "" {
			g.log.Warn("--admin-listen is set but no admin token is: the operator console is off; set SOVEREIGN_ADMIN_TOKEN (or --admin-token-file) to turn it on",
				"admin_listen", g.cfg.AdminListen)
		}
		return nil
	}
	var hosts []string
	if h, _, err := net.SplitHostPort(g.cfg.adminListen()); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	src := g.consoleSources()
	// The approval queue and the secrets live in KV buckets of the bus
	// prefix, so this console shows and decides the requests of every
	// replica.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src.Approvals = g.approvals.Queue()
	// The gateway's store has no key: the console lists names and can
	// read no value.
	sec := g.secretNames
	src.Secrets = func(ctx context.Context) ([]console.Secret, error) {
		list, err := sec.Names(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]console.Secret, 0, len(list))
		for _, i := range list {
			out = append(out, console.Secret{Name: i.Name, Updated: i.Updated})
		}
		return out, nil
	}
	adm, err := g.adminSources(ctx) // admin API (admin.go)
	if err != nil {
		return fmt.Errorf("operator console: %w", err)
	}
	c, err := console.New(console.Config{
		Admin:   adm,
		Token:   tok,
		Hosts:   hosts,
		Sources: src,
		Log:     slog.Default(),
	})
	if err != nil {
		return fmt.Errorf("operator console: %w", err)
	}
	g.admin.handler = c
	return nil
}

// consoleSources are the gateway's data for the console.
func (g *Gateway) consoleSources() console.Sources {
	return console.Sources{
		Audit:        g.queryAudit,
		Sessions:     g.consoleSessions,
		CloseSession: g.consoleCloseSession,
		Agent:        consoleAgent{bus: g.bus},
		Tokens:       g.consoleTokens,
	}
}

// consoleTokens lists the API tokens: names and dates, never secrets.
func (g *Gateway) consoleTokens(ctx context.Context) ([]console.Token, error) {
	list, err := g.auth.Tokens().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.Token, 0, len(list))
	for _, t := range list {
		ct := console.Token{Name: t.Name, ID: t.ID, Created: t.Created, State: t.State()}
		if t.LastUsed != nil {
			ct.LastUsed = *t.LastUsed
		}
		out = append(out, ct)
	}
	return out, nil
}

// AdminHandler is the operator console (what the admin listener serves),
// or nil when no admin token is set.
func (g *Gateway) AdminHandler() http.Handler { return g.admin.handler }

// AdminURL is the console's URL while ServeListener serves it, else "".
func (g *Gateway) AdminURL() string {
	if p := g.admin.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// serveAdmin starts the console's HTTP server on --admin-listen, when
// there is a console. stop shuts it down.
func (g *Gateway) serveAdmin(ctx context.Context) (stop func(context.Context) error, err error) {
	if g.admin.handler == nil {
		return func(context.Context) error { return nil }, nil
	}
	addr := g.cfg.adminListen()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("operator console: listen on %s: %w (is another gateway running? pick another address with --admin-listen or SOVEREIGN_ADMIN_LISTEN)", addr, err)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv := &http.Server{
		Handler:           g.admin.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	url := "http://" + connectAddr(ln.Addr()) + "/"
	// Reached where it is published (a container's port on the host) or
	// where it listens.
	reach, loopback := url, false
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = tcp.IP.IsLoopback()
	}
	if p := g.cfg.AdminPublished; p != "" {
		reach = "http://" + p + "/"
		h, _, _ := net.SplitHostPort(p)
		ip := net.ParseIP(h)
		loopback = strings.EqualFold(h, "localhost") || (ip != nil && ip.IsLoopback())
	}
	g.log.Info("operator console serving", "url", reach, "listen", ln.Addr().String())
	if !loopback {
		g.log.Warn("the operator console listens beyond loopback: anyone who reaches it can try the admin token; prefer 127.0.0.1 and an SSH tunnel",
			"addr", ln.Addr().String(), "published", g.cfg.AdminPublished)
	}
	// AdminURL says the console serves only once that is logged: a caller
	// waiting for it then finds the log lines too.
	g.admin.addr.Store(&url)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return func(sctx context.Context) error {
		g.admin.addr.Store(nil)
		cancel() // ends the live approval streams, which would hold Shutdown
		err := srv.Shutdown(sctx)
		if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			return fmt.Errorf("shut down the operator console: %w", err)
		}
		return nil
	}, nil
}

// queryAudit asks the history service for audit records.
func (g *Gateway) queryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	page, err := historybus.AuditQuery.Call(ctx, g.bus, q)
	if err != nil {
		if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE {
			return nil, errors.New("no history service answers on NATS (is it running? `sovereign up` runs one; `sovereign history` runs one alone)")
		}
		return nil, err
	}
	return page, nil
}

// consoleSessions lists the browser sessions bound to MCP sessions and
// handles, with each one's current URL (asked of its worker, at most
// consoleURLTimeout each).
func (g *Gateway) consoleSessions(ctx context.Context) ([]console.Session, error) {
	list, err := g.store.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []console.Session
	for _, l := range list {
		if l.Terminated || !l.Bound() {
			continue
		}
		out = append(out, console.Session{
			ID: l.Key, Kind: string(l.Kind), Owner: g.auth.OwnerName(l.Owner),
			Worker: l.WorkerID, BrowserSession: l.SessionID,
			Created: l.Created, Touched: l.Touched,
		})
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i].URL = g.sessionURL(ctx, out[i].Worker, out[i].BrowserSession)
		})
	}
	wg.Wait()
	return out, nil
}

// sessionURL asks a session's worker for its active tab's URL: "busy" when
// it does not answer within consoleURLTimeout (a call is running), "" when
// it cannot say.
//
// The request carries no URL policy: get_url loads nothing, so the worker
// must keep the policy in force for a request without one (it must not
// read a missing policy as "nothing enforced").
func (g *Gateway) sessionURL(ctx context.Context, worker, session string) string {
	ctx, cancel := context.WithTimeout(ctx, consoleURLTimeout)
	defer cancel()
	res, err := g.fleet.Call(ctx, worker, &browserv1.ToolRequest{
		SessionId: session,
		Tool:      &browserv1.ToolRequest_GetUrl{GetUrl: &browserv1.NoArgs{}},
	})
	if err != nil {
		if ctx.Err() != nil || bus.CodeOf(err) == commonv1.ErrorCode_TIMEOUT {
			return "busy"
		}
		return ""
	}
	for _, c := range res.GetContent() {
		if t := c.GetText(); t != "" {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// consoleCloseSession ends the browser session behind a console session id
// (a record key): the record forgets it, so that its client's next call
// opens a fresh browser session, and its worker closes it.
func (g *Gateway) consoleCloseSession(ctx context.Context, id string) error {
	if !state.ValidKey(id) {
		return fmt.Errorf("%q is not a session id from the sessions list: %w", id, console.ErrNotFound)
	}
	var worker, session string
	_, err := g.store.ModifyKey(ctx, id, func(r *state.Record) bool {
		if !r.Bound() {
			return false
		}
		worker, session = r.WorkerID, r.SessionID
		r.WorkerID, r.SessionID = "", ""
		return true
	})
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("the session expired or was ended: %w", console.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if worker == "" {
		return fmt.Errorf("the session has no browser session any more: %w", console.ErrNotFound)
	}
	g.log.InfoContext(ctx, "browser session closed from the console", "worker", worker, "session", session)
	g.capacity.Close(ctx, worker, session)
	return nil
}
