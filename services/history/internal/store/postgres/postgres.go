// Package postgres is the store backend for several history replicas on one
// PostgreSQL database, through pgx's pool.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// Advisory lock keys (per database).
const (
	// lockMigrate serializes migrations of replicas starting together.
	lockMigrate int64 = 0x736f765f686d6967 // "sov_hmig"
	// lockInsert serializes audit inserts so that seq order is commit
	// order: a follower reading seq > n never misses a record that commits
	// later with a smaller seq.
	lockInsert int64 = 0x736f765f68696e73 // "sov_hins"
)

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// approval: schema 3 (store.ApprovalSchema), the audit table has the
	// approval column.
	approval bool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database of dsn (a URL or key=value string) and
// migrates it to store.LatestSchema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenAt(ctx, dsn, store.LatestSchema)
}

// OpenAt is Open that migrates only up to version (tests of upgrades from an
// older schema).
func OpenAt(ctx context.Context, dsn string, version int) (*Store, error) {
	if version < 1 || version > len(migrations) {
		return nil, fmt.Errorf("postgres: no schema version %d", version)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// pgx prepares statements; a generic plan (what PostgreSQL switches to
	// after five runs) cannot tell a rare text or session from a common
	// one and scans the time index for both. Plan each query for its
	// values: planning costs far less than a wrong plan.
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{pool: pool}
	if err := s.migrate(ctx, version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cur, err := s.SchemaVersion(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.approval = cur >= store.ApprovalSchema
	return s, nil
}

// migrate applies the migrations after the recorded version up to version,
// holding a session advisory lock so that concurrent replicas migrate one
// after the other (the later ones find the work done).
func (s *Store) migrate(ctx context.Context, version int) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockMigrate); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		// A fresh context: unlock even when ctx is done. Should the unlock
		// fail, the connection is dropped, which releases the lock.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, lockMigrate); err != nil {
			conn.Hijack().Close(uctx)
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	var cur int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return err
	}
	if cur > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this program knows (%d)", cur, len(migrations))
	}
	for v := cur + 1; v <= version; v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, q := range migrations[v-1] {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return nil
}

// SchemaVersion implements store.Store.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	return v, nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// insertAudit inserts a batch given as one array per column, in order.
const insertAudit = `INSERT INTO audit (id, time_unix_nano, caller, mcp_session, browser_session, tool,
	arguments, result, duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars, approval)
	SELECT id, t, caller, mcp, browser, tool, args, res, dur, outcome, trace, source, client, args_chars, res_chars, approval
	FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[], $14::integer[], $15::integer[], $16::text[])
		WITH ORDINALITY AS u (id, t, caller, mcp, browser, tool, args, res, dur, outcome, trace, source, client,
			args_chars, res_chars, approval, ord)
	ORDER BY ord
	ON CONFLICT (id) DO NOTHING`

// insertAuditBeforeApproval is insertAudit on a schema before
// store.ApprovalSchema (without the approvals).
const insertAuditBeforeApproval = `INSERT INTO audit (id, time_unix_nano, caller, mcp_session, browser_session, tool,
	arguments, result, duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars)
	SELECT id, t, caller, mcp, browser, tool, args, res, dur, outcome, trace, source, client, args_chars, res_chars
	FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[], $14::integer[], $15::integer[])
		WITH ORDINALITY AS u (id, t, caller, mcp, browser, tool, args, res, dur, outcome, trace, source, client,
			args_chars, res_chars, ord)
	ORDER BY ord
	ON CONFLICT (id) DO NOTHING`

// InsertAudit implements store.Store.
func (s *Store) InsertAudit(ctx context.Context, recs []*historyv1.AuditRecord) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	n := len(recs)
	var (
		ids, callers, mcps, browsers, tools, args, results = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		outcomes, traces, sources, clients = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		times, durations                   = make([]int64, n), make([]int64, n)
		argChars, resChars                 = make([]int32, n), make([]int32, n)
		approvals                          = make([]*string, n)
	)
	for i, rec := range recs {
		r, err := store.NewAuditRow(rec)
		if err != nil {
			return 0, err
		}
		ids[i], times[i], callers[i], mcps[i], browsers[i], tools[i] = r.ID, r.TimeUnixNano, r.Caller, r.MCPSession, r.BrowserSession, r.Tool
		args[i], results[i], durations[i], outcomes[i], traces[i] = r.Arguments, r.Result, r.DurationMicros, r.Outcome, r.TraceID
		sources[i], clients[i], argChars[i], resChars[i] = r.Source, r.Client, r.ArgumentsChars, r.ResultChars
		approvals[i] = r.Approval
	}
	stmt, params := insertAudit, []any{ids, times, callers, mcps, browsers, tools, args, results,
		durations, outcomes, traces, sources, clients, argChars, resChars, approvals}
	if !s.approval {
		stmt, params = insertAuditBeforeApproval, params[:15]
	}
	var inserted int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockInsert); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, stmt, params...)
		inserted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: insert audit: %w", err)
	}
	return int(inserted), nil
}

// dialect: the text filter is ILIKE on both columns (served by the trigram
// indexes), with the wildcards of the text escaped.
var dialect = store.Dialect{
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Text: func(arg func(any) string, text string) string {
		p := "%" + likeEscaper.Replace(text) + "%"
		return "(arguments ILIKE " + arg(p) + " ESCAPE '\\' OR result ILIKE " + arg(p) + " ESCAPE '\\')"
	},
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// QueryAudit implements store.Store.
func (s *Store) QueryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	f, err := store.ParseAuditQuery(q)
	if err != nil {
		return nil, err
	}
	d := dialect
	if !s.approval {
		d.Columns = store.AuditColumnsBeforeApproval
	}
	query, args := store.AuditSQL(f, d)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: query audit: %w", err)
	}
	defer rows.Close()
	recs := make([]*historyv1.AuditRecord, 0, f.Limit+1)
	for rows.Next() {
		r, err := store.ScanAudit(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("postgres: query audit: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: query audit: %w", err)
	}
	return store.AuditPage(f, recs), nil
}

// DeleteAuditBefore implements store.Store: the oldest records first; rows
// another replica is deleting at the same time are skipped, not waited for.
func (s *Store) DeleteAuditBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: delete limit %d", store.ErrInvalid, limit)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE time_unix_nano < $1
		ORDER BY time_unix_nano LIMIT $2 FOR UPDATE SKIP LOCKED)`, before.UnixNano(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete audit: %w", err)
	}
	return tag.RowsAffected(), nil
}

func wrap(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotFound) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}
