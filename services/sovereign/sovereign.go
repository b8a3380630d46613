// Package sovereign is the all-in-one binary's logic: `up` runs an embedded
// NATS server (JetStream on, stored under the data dir), the gateway and one
// or more browser workers in one process; the other commands run one
// service against an existing NATS.
package sovereign

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/sovereign-fleet/sovereign/services/agent"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/history"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/signer"
)

// Version of the suite. Release builds set it with
// -ldflags "-X github.com/sovereign-fleet/sovereign/services/sovereign.Version=…".
var Version = "0.1.0"

// Usage is printed by `sovereign help`.
const Usage = `sovereign — a browser fleet for AI agents

Usage:
  sovereign up        run everything on this machine (embedded NATS, gateway, workers)
  sovereign gateway   run the MCP gateway against a NATS server
  sovereign browser   run one browser worker against a NATS server
  sovereign history   run the history service (audit trail, chat store) against a NATS server
  sovereign signer    run the signer (Nostr identities, window.nostr) against a NATS server
  sovereign agent     run the agent orchestrator (LLM tool loops, run_browser_task, chat) against a NATS server
  sovereign history copy --from <dsn> --to <dsn>   copy the history to another database
  sovereign audit     read the audit trail (operators only; -h for filters)
  sovereign token     create, list and revoke the API tokens MCP clients use (-h)
  sovereign secret    set, list or delete operator secrets that agents use as {{secrets.NAME}}
  sovereign healthcheck URL   exit 0 when URL (a /readyz) answers 200: for container healthchecks
  sovereign version   print the version

Run 'sovereign <command> -h' for the flags of a command.
`

// Command runs one subcommand.
func Command(ctx context.Context, cmd string, args []string) error {
	switch cmd {
	case "up":
		return up(ctx, args)
	case "gateway":
		return one(ctx, "gateway", args)
	case "browser":
		return one(ctx, "browser", args)
	case "signer":
		return one(ctx, "signer", args)
	case "agent":
		return one(ctx, "agent", args)
	case "history":
		if len(args) > 0 && args[0] == "copy" {
			return historyCopy(ctx, args[1:], os.Stdout)
		}
		return one(ctx, "history", args)
	case "audit":
		return auditCmd(ctx, args, os.Stdout)
	case "token":
		return tokenCmd(ctx, args, os.Stdout)
	case "secret":
		return secretCmd(ctx, args, stdio{os.Stdin, os.Stdout, os.Stderr}, os.Getenv)
	case "healthcheck":
		return healthcheck(ctx, args, os.Stdout)
	}
	return app.UsageError{Err: fmt.Errorf("unknown command %q\n\n%s", cmd, Usage)}
}

// one runs a single service against --nats-url.
func one(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("sovereign "+name, flag.ContinueOnError)
	var errs []error
	natsURL := fs.String("nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	var run func() error
	switch name {
	case "gateway":
		cfg := gateway.RegisterFlags(fs, &errs)
		run = func() error { return gateway.Serve(ctx, *cfg, *natsURL) }
	case "browser":
		cfg := browser.RegisterFlags(fs, &errs)
		browser.RegisterStandaloneFlags(fs, cfg)
		run = func() error { return browser.Serve(ctx, *cfg, *natsURL) }
	case "history":
		cfg := history.RegisterFlags(fs, &errs)
		fs.StringVar(&cfg.DataDir, "data-dir", config.Env("SOVEREIGN_DATA_DIR", "./.sovereign"), "where the SQLite history.db lives (unless --history-dsn says otherwise) [SOVEREIGN_DATA_DIR]")
		fs.StringVar(&cfg.Listen, "listen", config.Env("SOVEREIGN_HISTORY_LISTEN", "127.0.0.1:8092"), "host:port for /healthz, /readyz and /metrics; empty for none [SOVEREIGN_HISTORY_LISTEN]")
		run = func() error { return history.Serve(ctx, *cfg, *natsURL) }
	case "signer":
		cfg := signer.RegisterFlags(fs, &errs)
		signer.RegisterStandaloneFlags(fs, cfg)
		run = func() error { return signer.Serve(ctx, *cfg, *natsURL) }
	case "agent":
		cfg := agent.RegisterFlags(fs, &errs)
		agent.RegisterStandaloneFlags(fs, cfg)
		run = func() error { return agent.Serve(ctx, *cfg, *natsURL) }
	}
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	if len(errs) > 0 {
		return app.UsageError{Err: errors.Join(errs...)}
	}
	return run()
}

type upConfig struct {
	dataDir    string
	workers    int
	natsListen string
	natsURL    string
	history    bool
	signer     bool
	agent      bool
	addrFile   string
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sovereign up", flag.ContinueOnError)
	var errs []error
	var uc upConfig
	fs.StringVar(&uc.dataDir, "data-dir", config.Env("SOVEREIGN_DATA_DIR", "./.sovereign"), "where NATS JetStream and the SQLite history keep their data [SOVEREIGN_DATA_DIR]")
	fs.IntVar(&uc.workers, "workers", config.MustInt(&errs, "SOVEREIGN_WORKERS", 1), "browser workers to run in this process (one Chromium each) [SOVEREIGN_WORKERS]")
	fs.StringVar(&uc.natsListen, "nats-listen", config.Env("SOVEREIGN_NATS_LISTEN", "127.0.0.1:4222"), "address of the embedded NATS server, so more workers and CLI tools can join; 'off' for none [SOVEREIGN_NATS_LISTEN]")
	fs.StringVar(&uc.natsURL, "nats-url", config.Env("NATS_URL", ""), "use this NATS server instead of the embedded one [NATS_URL]")
	fs.BoolVar(&uc.history, "history", config.MustBool(&errs, "SOVEREIGN_HISTORY", true), "run the history service here (audit trail and chat store); --history=false when another process runs it [SOVEREIGN_HISTORY]")
	fs.BoolVar(&uc.signer, "signer", config.MustBool(&errs, "SOVEREIGN_SIGNER", true), "run the signer here (Nostr identities for login and window.nostr); --signer=false when another process runs it [SOVEREIGN_SIGNER]")
	fs.BoolVar(&uc.agent, "agent", config.MustBool(&errs, "SOVEREIGN_AGENT", true), "run the agent orchestrator here (LLM tool loops for run_browser_task and the console's chat; set SOVEREIGN_LLM_BASE_URL and SOVEREIGN_LLM_MODEL); --agent=false when another process runs it [SOVEREIGN_AGENT]")
	fs.StringVar(&uc.addrFile, "addr-file", config.Env("SOVEREIGN_ADDR_FILE", ""), "once MCP is served, write the addresses up serves as JSON to this file ({\"mcp\": …, \"console\": …, \"nats\": …}; removed when up stops): for scripts that start it on port 0 (--listen 127.0.0.1:0) [SOVEREIGN_ADDR_FILE]")
	gcfg := gateway.RegisterFlags(fs, &errs)
	wcfg := browser.RegisterFlags(fs, &errs)
	hcfg := history.RegisterFlags(fs, &errs)
	scfg := signer.RegisterFlags(fs, &errs)
	acfg := agent.RegisterFlags(fs, &errs)
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	hcfg.DataDir = uc.dataDir
	scfg.DataDir = uc.dataDir
	// The system tools' workspace lives in the data dir unless it was set.
	if !flagSet(fs, "workspace") && os.Getenv("SOVEREIGN_WORKSPACE") == "" {
		gcfg.Workspace = filepath.Join(uc.dataDir, "workspace")
	}
	if uc.workers < 0 {
		errs = append(errs, fmt.Errorf("--workers %d: must be 0 or more", uc.workers))
	}
	if err := gcfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if uc.history {
		if err := hcfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return app.UsageError{Err: errors.Join(errs...)}
	}
	// Operator secrets: the configured key, or <data dir>/secret.key.
	secretKey, err := secretKeyForUp(uc.dataDir)
	if err != nil {
		return err
	}
	wcfg.SecretKey = secretKey
	acfg.SecretKey = secretKey

	// NATS: embedded unless --nats-url names one.
	var opts []nats.Option
	natsURL, natsServed := uc.natsURL, ""
	if natsURL == "" {
		if err := os.MkdirAll(uc.dataDir, 0o700); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		listen := uc.natsListen
		if listen == "off" {
			listen = ""
		}
		srv, err := natsrv.Start(natsrv.Options{Listen: listen, DataDir: uc.dataDir})
		if err != nil {
			if listen != "" {
				return fmt.Errorf("%w\n(is another sovereign running? pass --nats-listen 127.0.0.1:0 for any free port, --nats-listen off, or --nats-url to join an existing NATS)", err)
			}
			return err
		}
		defer srv.Stop()
		abs, _ := filepath.Abs(uc.dataDir)
		if listen != "" {
			natsServed = srv.ClientURL()
			slog.Info("embedded NATS ready", "url", srv.ClientURL(), "data_dir", abs,
				"join_more_workers", "sovereign browser --nats-url "+srv.ClientURL())
		} else {
			slog.Info("embedded NATS ready (in-process only)", "data_dir", abs)
		}
		opts = append(opts, nats.InProcessServer(srv))
	}

	// The services, in start order; up stops them in reverse.
	var steps []step
	if uc.history {
		if err := os.MkdirAll(uc.dataDir, 0o700); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		steps = append(steps, step{"history", func(ctx context.Context, c *bus.Conn) (app.Service, error) {
			return history.New(ctx, *hcfg, c)
		}})
	}
	if uc.signer {
		steps = append(steps, step{"signer", func(ctx context.Context, c *bus.Conn) (app.Service, error) {
			return signer.New(ctx, *scfg, c)
		}})
	}
	if uc.agent {
		steps = append(steps, step{"agent", func(ctx context.Context, c *bus.Conn) (app.Service, error) {
			return agent.New(ctx, *acfg, c)
		}})
	}
	var workers []*browser.Worker
	gwc := make(chan *gateway.Gateway, 1) // the gateway, once made, for --addr-file
	for i := range uc.workers {
		cfg := *wcfg
		if cfg.ID != "" && uc.workers > 1 {
			cfg.ID = fmt.Sprintf("%s-%d", cfg.ID, i+1)
		}
		cfg, err := cfg.Resolve() // its ID names the connection
		if err != nil {
			return app.UsageError{Err: err}
		}
		steps = append(steps, step{"browser-" + cfg.ID, func(ctx context.Context, c *bus.Conn) (app.Service, error) {
			w, err := browser.New(ctx, cfg, c)
			if err != nil {
				return nil, err
			}
			workers = append(workers, w)
			return w, nil
		}})
	}
	steps = append(steps, step{"gateway", func(ctx context.Context, c *bus.Conn) (app.Service, error) {
		// Serve MCP only once the workers take sessions, so that a client
		// that connects at once is not told that no worker runs.
		for _, w := range workers {
			select {
			case <-w.Ready():
			case <-ctx.Done():
				return nil, errNotStarted
			}
		}
		gw, err := gateway.New(ctx, *gcfg, c)
		if err != nil {
			return nil, err
		}
		gwc <- gw
		return gw, nil
	}})
	if uc.workers == 0 {
		slog.Warn("no browser workers in this process: start some with 'sovereign browser --nats-url …'")
	}
	if uc.addrFile != "" {
		actx, stop := context.WithCancel(ctx)
		defer stop()
		go writeAddrFile(actx, uc.addrFile, gwc, natsServed)
		defer os.Remove(uc.addrFile)
	}
	err = runAll(ctx, steps, func(name string) (*bus.Conn, func(), error) {
		return app.Connect(natsURL, "sovereign-"+name, "", opts...)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	slog.Info("sovereign stopped")
	return nil
}

// writeAddrFile writes --addr-file once the gateway from gwc serves (or
// gives up when ctx ends): where MCP, the console and NATS are reached,
// with the ports the system chose for :0. It writes a file beside path and
// renames it, so that a reader never sees half of it.
func writeAddrFile(ctx context.Context, path string, gwc <-chan *gateway.Gateway, nats string) {
	var gw *gateway.Gateway
	select {
	case gw = <-gwc:
	case <-ctx.Done():
		return
	}
	select {
	case <-gw.Serving():
	case <-ctx.Done():
		return
	}
	b, err := json.Marshal(struct {
		MCP     string `json:"mcp"`
		Console string `json:"console,omitempty"`
		NATS    string `json:"nats,omitempty"`
	}{gw.URL(), gw.AdminURL(), nats})
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		slog.Error("cannot write --addr-file", "path", path, "err", err)
		return
	}
	slog.Info("addresses written", "path", path)
}

// step starts one service of `sovereign up` on a connection of its own,
// named sovereign-<name>.
type step struct {
	name  string
	start func(ctx context.Context, c *bus.Conn) (app.Service, error)
}

// errNotStarted is what a step returns when up stopped while it waited.
var errNotStarted = errors.New("stopped while starting")

// runAll starts the steps in order, each service's Run in a goroutine of
// its own, until ctx ends or a Run fails; then it closes the services in
// reverse order (each Close stops its Run and waits for it, up to
// app.CloseTimeout) and their connections, and returns the first error.
func runAll(ctx context.Context, steps []step, connect func(name string) (*bus.Conn, func(), error)) (err error) {
	// Runs end by Close, in order; a failing Run ends the others at once.
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		err = errors.Join(err, g.Wait())
	}()
	// A step's I/O ends when up is told to stop or a service failed.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(gctx, stop)
	for _, st := range steps {
		c, closeConn, err := connect(st.name)
		if err != nil {
			return err
		}
		undo = append(undo, closeConn)
		s, err := st.start(sctx, c)
		if errors.Is(err, errNotStarted) || err != nil && ctx.Err() != nil {
			return nil // stopping: g.Wait has the reason, if any
		}
		if err != nil {
			return err
		}
		undo = append(undo, func() {
			cctx, cancel := context.WithTimeout(context.Background(), app.CloseTimeout)
			defer cancel()
			if err := s.Close(cctx); err != nil {
				slog.Warn("close", "service", st.name, "err", err)
			}
		})
		g.Go(func() error { return s.Run(gctx) })
	}
	<-sctx.Done()
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
