// Package gateway is Sovereign's MCP endpoint: one Streamable HTTP server
// (/mcp) that serves the browser tool catalog to MCP clients of both
// protocol generations and runs each call on a browser worker over the bus.
//
// Clients on 2025-03-26 … 2025-11-25 get a protocol session (Mcp-Session-Id)
// and one browser session per MCP session, opened at their first browser
// tool and closed when they end the MCP session. Clients on 2026-07-28 have
// no protocol session: a call without a "session" argument opens a browser
// session and returns a handle, bound to the caller's credential, to pass in
// later calls. All of that state lives in NATS KV, so replicas are
// interchangeable.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/micro"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/approve"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/capacity"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/extend"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/hostguard"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/identity"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/login"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/otelmcp"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/systools"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Version is reported to MCP clients as serverInfo.version.
const Version = "0.1.0"

// Name is the MCP server name.
const Name = "sovereign"

// localIdle is how long this replica keeps the transport's in-memory state
// of an MCP session nobody used here; the session itself lives in KV.
const localIdle = 30 * time.Minute

const instructions = `Sovereign drives real Chromium browsers.
Start with open (a URL), then snapshot to see the page as an accessibility tree with refs like e5,
and act with click, fill, type and press on those refs. Take a new snapshot after the page changes.
For Nostr web apps, log the browser session in first with login (login_status shows who is logged in):
its pages then get window.nostr.
Clients without an MCP session (protocol 2026-07-28): the first browser call returns a session handle
(session: sov_…); pass it as "session" in every later call to keep using the same browser session.`

// Gateway serves MCP on the bus's browser fleet. It is the composition
// root: New starts its parts in order, the slices under internal/
// (identity, approve, capacity, extend) among them, each handed the parts
// its ports need; the tool-call path runs through tools, the dispatcher
// (dispatch.go).
type Gateway struct {
	cfg       Config
	bus       *bus.Conn
	store     *state.Store
	fleet     *fleet.Fleet
	sessions  *sessionManagers
	mcp       *server.MCPServer
	tools     *dispatch.Registry
	transport *server.StreamableHTTPServer
	handler   http.Handler
	audit     *audit.Publisher
	log       *slog.Logger
	admin     admin // the operator console (console.go)

	auth *identity.Authenticator // API tokens and OAuth (internal/identity)

	approvals   *approve.Gate  // holds monitored calls for a person (internal/approve)
	policy      *globalPolicy  // URL rules and monitored tools (policy.go)
	secretNames *secrets.Store // no key: names only

	toolsSvc micro.Service // sov.tools.* (bus.go)

	workspace *systools.Workspace // the system tools' (system.go); nil when they are off

	ext    *extend.Extensions // script and custom HTTP tools (internal/extend)
	logins *login.Identities  // the identity tools and --require-login (internal/login)

	capacity *capacity.Keeper // session limits, idle give-back, the open queue (internal/capacity)

	migrated chan struct{} // closed when the legacy saved storage migration ends (storage.go)

	life app.Lifetime // Run until Close (the service contract)

	// url is /mcp's URL while serve serves it (URL); serving is closed
	// the first time it does (Serving).
	url         atomic.Pointer[string]
	serving     chan struct{}
	servingOnce sync.Once

	stop []func(context.Context) error // what New started, undone in reverse by Close
}

// New builds a gateway on c: it checks cfg (zero fields take the
// defaults), opens its buckets, registers the tools and serves the
// dispatcher on the bus. ctx bounds the start (scripts may take seconds to
// load). A failed start undoes what started. Call Run to serve, or mount
// Handler and call Close when done.
func New(ctx context.Context, cfg Config, c *bus.Conn) (_ *Gateway, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	guard, err := hostguard.New(cfg.AllowedHosts, cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:   cfg,
		bus:   c,
		fleet: fleet.New(c, fleet.DefaultLiveness),
		log:   slog.Default().With("component", "gateway"),

		serving: make(chan struct{}),
	}
	g.logins = login.New(c, cfg.RequireLogin, g.log) // internal/login
	defer func() {
		if err != nil {
			_ = g.undo(context.WithoutCancel(ctx))
		}
	}()
	// Each step's errors name what failed; a step gets startStepTimeout.
	step := func(start func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, startStepTimeout)
		defer cancel()
		return start(sctx)
	}
	if g.policy, err = loadGlobalPolicy(cfg); err != nil { // URL policy (policy.go)
		return nil, err
	}
	if err := step(func(ctx context.Context) error {
		g.store, err = state.Open(ctx, c.NATS(), cfg.Bucket, cfg.SessionTTL)
		if err != nil {
			return fmt.Errorf("session state: %w", err)
		}
		g.onClose(func(context.Context) error { g.store.Close(); return nil })
		return nil
	}); err != nil {
		return nil, err
	}
	g.sessions = &sessionManagers{store: g.store, fleet: g.fleet, log: g.log}
	for _, start := range []func(context.Context) error{
		g.openSecretNames, // secrets_list (local.go)
		g.setupAuth,       // API tokens and OAuth (internal/identity)
		g.openApprovals,   // approve.go: over the URL policy and the tokens
		g.openAudit,
	} {
		if err := step(start); err != nil {
			return nil, err
		}
	}
	g.capacity = g.keeper() // reclaim.go
	g.mcp = server.NewMCPServer(Name, Version,
		server.WithTitle("Sovereign browser fleet"),
		server.WithInstructions(instructions),
		server.WithToolCapabilities(true), // list_changed when deployed tools change (internal/extend)
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithTracer(otelmcp.Tracer()),
		server.WithPropagator(otelmcp.Propagator()),
		server.WithMetaPropagator(otelmcp.MetaPropagator()),
		server.WithElicitation(), // approvals ask 2025 clients (internal/approve)
	)
	// The audit record sees the approval's decision: approve runs inside
	// audit (internal/approve).
	g.tools = dispatch.NewRegistry(dispatch.Recover(g.log), dispatch.Audit(g.audit, g.log), g.approvals.Middleware)
	g.registerCatalog()
	// Script and custom HTTP tools, after the built-in ones (internal/extend).
	// Loading scripts may take seconds (describe() has 5 s each): this
	// step has the caller's context, not a step's deadline.
	if err := g.setupExtensions(ctx); err != nil {
		return nil, err
	}
	g.transport = server.NewStreamableHTTPServer(g.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManagerResolver(g.sessions),
		server.WithHTTPContextFunc(withCaller),
		// The guard checks Host against the configured list instead.
		server.WithDisableLocalhostProtection(true),
		server.WithSessionIdleTTL(localIdle),
		server.WithStreamableHTTPLogger(g.log),
	)
	g.onClose(func(ctx context.Context) error {
		if err := g.transport.Shutdown(ctx); err != nil {
			return fmt.Errorf("stop MCP transport: %w", err)
		}
		return nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", guard.Wrap(g.auth.Wrap(readBody(cfg.MaxBody, otelmcp.HTTP(g.sessionCheck(g.transport), requestMeta)))))
	g.auth.Routes(mux, guard)
	health.Register(mux,
		health.NATS(c.NATS()),
		health.Check{Name: "kv", Func: func(ctx context.Context) error {
			if !c.NATS().IsConnected() {
				return errors.New("not checked: NATS is not connected") // at once, not at the probe's deadline
			}
			return g.store.Ping(ctx)
		}},
	)
	health.Metrics(mux)
	g.handler = mux
	if err := g.setupConsole(); err != nil { // operator console (console.go)
		return nil, err
	}
	if err := g.setupSystem(); err != nil { // system tools (system.go)
		return nil, err
	}
	g.onClose(g.capacity.Start())          // idle sessions given back
	if err := g.serveTools(); err != nil { // the dispatcher on the bus (bus.go)
		return nil, err
	}
	g.startStorageMigration() // legacy saved storage to its owners (storage.go)
	return g, nil
}

// startStepTimeout bounds each NATS step of New.
const startStepTimeout = 10 * time.Second

// openAudit starts the audit publisher.
func (g *Gateway) openAudit(context.Context) error {
	p, err := audit.NewPublisher(g.bus.NATS(), audit.PublisherConfig{
		Source: "gateway", Prefix: g.bus.Prefix(), Buffer: g.cfg.AuditBuffer, Redactor: new(redact.Set),
	})
	if err != nil {
		return fmt.Errorf("audit publisher: %w", err)
	}
	g.audit = p
	g.onClose(p.Close) // flushes what the stream has not accepted yet
	return nil
}

// registerCatalog registers the built-in tools of the catalog but the
// system tools (setupSystem registers those when they are on).
func (g *Gateway) registerCatalog() {
	sel, _ := catalog.ParseSelection(g.cfg.Tools) // Validate checked it
	if sel != nil {
		g.log.Info("listing only some tools (--tools)", "tools", g.cfg.Tools, "listed", len(sel))
	}
	var entries []dispatch.Entry
	for _, t := range catalog.Tools() {
		e := dispatch.Entry{Kind: dispatch.Browser, Tool: catalogTool(t), AgentSchema: t.AgentInputSchema()}
		switch {
		case t.System, !sel.Has(t.Name):
			continue
		case t.StartsRuns():
			e.Kind, e.Handler = dispatch.Run, g.runTaskHandler(t) // agent.go
		case t.Local:
			e.Kind, e.Handler = dispatch.Local, g.localHandler(t) // local.go
		case t.Identity:
			e.Kind, e.Handler = dispatch.Identity, g.identityHandler(t) // login.go
		default:
			e.Handler = g.browserHandler(t) // tools.go
		}
		entries = append(entries, e)
	}
	g.mcpTools().Add(entries...)
}

// onClose pushes the undo of a start step.
func (g *Gateway) onClose(f func(context.Context) error) { g.stop = append(g.stop, f) }

// undo stops what New started, in reverse order.
func (g *Gateway) undo(ctx context.Context) error {
	var errs []error
	for _, f := range slices.Backward(g.stop) {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	g.stop = nil
	return errors.Join(errs...)
}

// Handler serves /mcp, /healthz, /readyz and /metrics.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Close stops answering on the bus, ends the open GET streams and stops
// the transport's housekeeping, waits for the calls still running, then
// releases what New opened, in reverse.
// It does not end any MCP session: those live on in KV for other replicas.
// Audit records not yet accepted by the stream are flushed first.
func (g *Gateway) Close(ctx context.Context) error {
	// Stop Run (HTTP), stop taking calls on the bus, let the running ones
	// finish, then undo the rest (the audit publisher flushes their
	// records last but one).
	errs := []error{g.life.Stop(ctx)}
	if g.toolsSvc != nil {
		if err := g.toolsSvc.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the tools service: %w", err))
		}
	}
	if err := g.transport.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop MCP transport: %w", err))
	}
	if err := g.tools.Drain(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, g.undo(ctx))...)
}

// Run serves HTTP on cfg.Listen until ctx ends or Close is called, then
// stops serving HTTP gracefully (the GET streams end, running requests
// finish). Close releases the rest.
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another sovereign or gateway running? pick another address with --listen)", g.cfg.Listen, err)
	}
	return g.ServeListener(ctx, ln)
}

// Serving is closed once Run (or ServeListener) has bound its listeners
// and serves MCP, and the operator console when there is one: URL and
// AdminURL then say where (with the port the system chose for a :0).
func (g *Gateway) Serving() <-chan struct{} { return g.serving }

// URL is /mcp's URL while the gateway serves it, else "".
func (g *Gateway) URL() string {
	if p := g.url.Load(); p != nil {
		return *p
	}
	return ""
}

// ServeListener is Run on a listener the caller opened.
func (g *Gateway) ServeListener(ctx context.Context, ln net.Listener) error {
	return g.life.Run(ctx, func(ctx context.Context) error { return g.serve(ctx, ln) })
}

func (g *Gateway) serve(ctx context.Context, ln net.Listener) error {
	if err := g.auth.CheckServe(ln); err != nil { // authentication (internal/identity)
		return err
	}
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	url := "http://" + connectAddr(ln.Addr()) + "/mcp"
	g.log.Info("MCP gateway serving", "url", url, "connect", "claude mcp add --transport http sovereign "+url,
		"tool_timeout", g.cfg.ToolTimeout.String(), "allowed_hosts", g.cfg.AllowedHosts)
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		g.log.Warn("listening beyond loopback: clients must send a Host in --allowed-hosts and an Origin in --allowed-origins",
			"addr", ln.Addr().String())
	}
	stopAdmin, err := g.serveAdmin(ctx) // operator console (console.go)
	if err != nil {
		_ = ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	g.url.Store(&url)
	defer g.url.Store(nil)
	g.servingOnce.Do(func() { close(g.serving) })
	select {
	case err := <-errc:
		_ = stopAdmin(context.Background())
		return fmt.Errorf("serve MCP: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// End the GET streams, which would hold Shutdown, then let the
	// requests running finish.
	cerr := stopAdmin(sctx)
	if err := g.transport.Shutdown(sctx); err != nil {
		cerr = errors.Join(cerr, fmt.Errorf("stop MCP transport: %w", err))
	}
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down HTTP: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve MCP: %w", err)
	}
	g.log.Info("MCP gateway stopped serving HTTP")
	return cerr
}

// connectAddr is the address a local client should use: loopback when the
// gateway listens on every interface.
func connectAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return tcp.String()
}

// Serve connects to NATS at natsURL and runs a gateway until ctx ends:
// what `sovereign gateway` and cmd/gateway do. A bad configuration is an
// app.UsageError, reported before connecting.
func Serve(ctx context.Context, cfg Config, natsURL string) error {
	if err := cfg.withDefaults().Validate(); err != nil {
		return app.UsageError{Err: err}
	}
	return app.Serve(ctx, natsURL, "sovereign-gateway", func(ctx context.Context, c *bus.Conn) (*Gateway, error) {
		return New(ctx, cfg, c)
	})
}

// ToolInfo describes one tool of the catalog for other surfaces (the
// agent's OpenAI tools array, docs).
type ToolInfo struct {
	Name        string
	Title       string
	Description string
	InputSchema []byte // JSON Schema
	ReadOnly    bool
}

// Tools returns the browser tool catalog in its documented order, without
// the system tools (system.go), which a gateway has only when configured.
func Tools() []ToolInfo {
	var out []ToolInfo
	for _, t := range catalog.Tools() {
		if t.System {
			continue
		}
		out = append(out, ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema(), ReadOnly: t.ReadOnly})
	}
	return out
}

// ToolsMarkdown renders docs/tools.md from the catalog.
func ToolsMarkdown() string { return catalog.Markdown() }

// ToolNames lists every tool a policy may name (an API token's monitored
// tools): the catalog, system tools included, whether or not this
// gateway serves them.
func ToolNames() []string {
	var out []string
	for _, t := range catalog.Tools() {
		out = append(out, t.Name)
	}
	return out
}
