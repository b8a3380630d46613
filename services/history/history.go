// Package history is Sovereign's history service: it stores the audit trail
// of every tool call, consumed from the JetStream stream SOV_AUDIT with a
// durable consumer (acknowledged only after the write commits, duplicates
// ignored by id), answers operators' audit queries on the bus, and keeps
// the agent's chat sessions. Storage is SQLite (one file, the embedded
// default) or PostgreSQL (several replicas on one database).
//
// Nothing here is reachable from MCP: the gateway's catalog has no tool
// that reads or writes the trail.
package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/sync/errgroup"

	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/postgres"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/sqlite"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/health"
)

// Version of the service, reported to `nats micro info`.
const Version = "0.1.0"

// Service is one history replica.
type Service struct {
	cfg   Config
	bus   *bus.Conn
	js    jetstream.JetStream
	store store.Store
	kind  string
	svc   micro.Service
	ready chan struct{}
	log   *slog.Logger
	life  app.Lifetime // Run until Close
}

// New opens the database (applying migrations), ensures the audit streams
// and registers the bus endpoints. Call Run to consume, and Close when done.
func New(ctx context.Context, cfg Config, c *bus.Conn) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, kind, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.NATS())
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := audit.EnsureStreams(sctx, js, c.Prefix(), cfg.Stream, true); err != nil {
		_ = st.Close()
		return nil, err
	}
	s := &Service{cfg: cfg, bus: c, js: js, store: st, kind: kind, ready: make(chan struct{}),
		log: slog.Default().With("component", "history")}
	if err := s.register(); err != nil {
		_ = st.Close()
		return nil, err
	}
	// The endpoints' subscriptions reach the server before New returns (and
	// so before /readyz says ready): a query made right after is answered.
	if err := c.Served(); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("history: %w", err)
	}
	v, _ := st.SchemaVersion(ctx)
	s.log.Info("history ready", "backend", kind, "schema_version", v, "retention", cfg.Retention.String())
	return s, nil
}

func openStore(ctx context.Context, cfg Config) (store.Store, string, error) {
	kind, target, err := cfg.backend()
	if err != nil {
		return nil, "", err
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch kind {
	case "postgres":
		st, err := postgres.Open(octx, target)
		if err != nil {
			return nil, "", fmt.Errorf("history database (PostgreSQL): %w", err)
		}
		return st, kind, nil
	default:
		st, err := sqlite.Open(octx, target)
		if err != nil {
			return nil, "", fmt.Errorf("history database (SQLite at %s): %w", target, err)
		}
		return st, kind, nil
	}
}

// Ready is closed once the consumer is attached to the audit stream.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Run consumes the audit stream, runs retention, keeps the backlog gauges
// and serves cfg.Listen until ctx ends or Close is called; it returns once
// all of them stopped.
func (s *Service) Run(ctx context.Context) error {
	return s.life.Run(ctx, func(ctx context.Context) error {
		if s.cfg.Listen != "" {
			addr, err := health.Serve(ctx, s.cfg.Listen, s.checks()...)
			if err != nil {
				return err
			}
			s.log.Info("history health and metrics", "url", "http://"+addr.String()+"/readyz")
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { s.retain(ctx); return nil })
		g.Go(func() error { s.watchBacklog(ctx); return nil })
		g.Go(func() error { return s.consume(ctx) })
		return g.Wait()
	})
}

// checks are the readiness checks: NATS connected and the database answers.
func (s *Service) checks() []health.Check {
	return []health.Check{
		health.NATS(s.bus.NATS()),
		{Name: "database", Func: s.store.Ping},
	}
}

// Checks lets a process that embeds history add its readiness to its own
// /readyz.
func (s *Service) Checks() []health.Check { return s.checks() }

// Close stops Run, stops the bus endpoints, lets running requests finish
// (up to 5 s, within ctx) and closes the database.
func (s *Service) Close(ctx context.Context) error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop())
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	errs = append(errs, s.life.Stop(ctx))
	_ = s.bus.Wait(ctx)
	errs = append(errs, s.store.Close())
	return errors.Join(errs...)
}

// retentionBatch is how many records one delete removes; small enough that
// a writer never waits long for SQLite's lock.
const retentionBatch = 1000

// retain deletes records older than the retention, hourly, in batches.
func (s *Service) retain(ctx context.Context) {
	if s.cfg.Retention <= 0 {
		return
	}
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Prune(ctx, time.Now().Add(-s.cfg.Retention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("audit retention", "err", err, "deleted", n)
		case n > 0:
			s.log.Info("audit retention deleted old records", "deleted", n, "older_than", s.cfg.Retention.String())
		}
		t.Reset(time.Hour)
	}
}

// Prune deletes every record older than before, in batches with a pause
// between them so writers go on, and returns how many it deleted.
func (s *Service) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		n, err := s.store.DeleteAuditBefore(ctx, before, retentionBatch)
		total += n
		if err != nil || n < retentionBatch {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
