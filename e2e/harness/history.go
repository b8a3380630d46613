package harness

import (
	"context"
	"errors"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

// History is a running `sovereign history`.
type History struct {
	*Proc
	// Base is its health and metrics URL (http://127.0.0.1:port).
	Base string
}

// StartHistory starts `sovereign history` with its SQLite file in dataDir,
// or on the database dsn names when it is not empty, and waits for /readyz.
func (f *Fleet) StartHistory(ctx context.Context, dataDir, dsn string, extra ...string) (*History, error) {
	if f.NATS == nil {
		return nil, errors.New("start NATS before history")
	}
	args := []string{"history", "--nats-url", f.NATS.URL, "--listen", anyPort, "--data-dir", dataDir}
	if dsn != "" {
		args = append(args, "--history-dsn", dsn)
	}
	p, base, err := f.startService(ctx, "history", "history health and metrics", append(args, extra...), nil)
	if err != nil {
		return nil, err
	}
	return &History{Proc: p, Base: base}, nil
}

// Audit runs one audit query on the fleet's history service.
func (f *Fleet) Audit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	bc := f.Bus()
	if bc == nil {
		return nil, errors.New("no NATS connection")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return historybus.AuditQuery.Call(ctx, bc, q)
}

// AuditAll walks every page of q (newest first) and returns all records.
func (f *Fleet) AuditAll(ctx context.Context, q *historyv1.AuditQuery) ([]*historyv1.AuditRecord, error) {
	var all []*historyv1.AuditRecord
	q.Limit = 1000
	for {
		page, err := f.Audit(ctx, q)
		if err != nil {
			return all, err
		}
		all = append(all, page.GetRecords()...)
		if page.GetNextCursor() == "" {
			return all, nil
		}
		q.Cursor = page.GetNextCursor()
	}
}
