// Package sqlite is the embedded store backend: one SQLite file (WAL
// journal) through modernc.org/sqlite, without cgo. Writes go through one
// connection, as SQLite serializes writers anyway; reads use a pool that
// runs beside it.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// Store is a store.Store in one SQLite file.
type Store struct {
	w      *sql.DB // the writer: one connection, transactions BEGIN IMMEDIATE
	r      *sql.DB // readers (query_only)
	insert *sql.Stmt
	fts    bool // schema 2: audit_fts to keep up to date
	// approval: schema 3 (store.ApprovalSchema), the audit table has the
	// approval column.
	approval bool
	// scanFirst is how many of the newest records a text query checks one
	// by one before it asks the trigram index (tests lower it).
	scanFirst int
}

var _ store.Store = (*Store)(nil)

// Connection settings. busy_timeout lets another process's writer finish;
// synchronous=NORMAL is durable across process crashes in WAL mode (a power
// loss may lose the last transactions, never corrupt the file).
const (
	common = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	writer = "?_txlock=immediate&" + common + "&_pragma=journal_mode(WAL)&_pragma=cache_size(-65536)"
	reader = "?" + common + "&_pragma=query_only(1)&_pragma=cache_size(-16384)"
)

// Open opens (creating it and its directory when missing, mode 0600) the
// database at path and migrates it to store.LatestSchema.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenAt(ctx, path, store.LatestSchema)
}

// OpenAt is Open that migrates only up to version (tests of upgrades from an
// older schema).
func OpenAt(ctx context.Context, path string, version int) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || path == ":memory:" {
		return nil, fmt.Errorf("sqlite: bad database path %q", path)
	}
	if version < 1 || version > len(migrations) {
		return nil, fmt.Errorf("sqlite: no schema version %d", version)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	f.Close()

	s := &Store{scanFirst: scanFirst}
	if s.w, err = sql.Open("sqlite", path+writer); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxIdleTime(0)
	s.w.SetConnMaxLifetime(0)
	if err := s.migrateRetrying(ctx, version); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	cur, err := schemaVersion(ctx, s.w)
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	s.fts = cur >= 2
	s.approval = cur >= store.ApprovalSchema
	if s.r, err = sql.Open("sqlite", path+reader); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	insert := insertAudit
	if !s.approval {
		insert = insertAuditBeforeApproval
	}
	if s.insert, err = s.w.PrepareContext(ctx, insert); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	return s, nil
}

// migrateRetrying is migrate, tried again while SQLite answers
// SQLITE_BUSY for up to 10 s: when several processes open a new file at
// once, the first connection's switch to WAL and a statement that reads
// the schema and then writes can get SQLITE_BUSY at once, without the
// busy_timeout wait.
func (s *Store) migrateRetrying(ctx context.Context, version int) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		err := s.migrate(ctx, version)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// migrate applies the migrations after the recorded version up to version,
// each in a transaction (BEGIN IMMEDIATE: another process migrating the same
// file waits, then sees the version it recorded).
func (s *Store) migrate(ctx context.Context, version int) error {
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
	)`); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	for v := 1; v <= version; v++ {
		if err := s.migrateTo(ctx, v); err != nil {
			return err
		}
	}
	cur, err := schemaVersion(ctx, s.w)
	if err != nil {
		return err
	}
	if cur > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this program knows (%d)", cur, len(migrations))
	}
	return nil
}

func (s *Store) migrateTo(ctx context.Context, v int) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&done); err != nil {
		return err
	}
	if done > 0 {
		return nil
	}
	for _, q := range migrations[v-1] {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES (?)`, v); err != nil {
		return fmt.Errorf("migration %d: %w", v, err)
	}
	return tx.Commit()
}

func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// SchemaVersion implements store.Store.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return schemaVersion(ctx, s.r) }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return s.w.PingContext(ctx)
}

// Close implements store.Store.
func (s *Store) Close() error {
	var errs []error
	if s.insert != nil {
		errs = append(errs, s.insert.Close())
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

const insertAudit = `INSERT INTO audit (id, time_unix_nano, caller, mcp_session, browser_session, tool,
	arguments, result, duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars, approval)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// insertAuditBeforeApproval is insertAudit on a schema before
// store.ApprovalSchema (without the approval).
const insertAuditBeforeApproval = `INSERT INTO audit (id, time_unix_nano, caller, mcp_session, browser_session, tool,
	arguments, result, duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// InsertAudit implements store.Store.
func (s *Store) InsertAudit(ctx context.Context, recs []*historyv1.AuditRecord) (int, error) {
	rows := make([]store.AuditRow, len(recs))
	for i, r := range recs {
		var err error
		if rows[i], err = store.NewAuditRow(r); err != nil {
			return 0, err
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	defer tx.Rollback()
	// The new records are those after the largest seq now: this is the
	// only writer until commit.
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM audit`).Scan(&last); err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	stmt := tx.StmtContext(ctx, s.insert)
	inserted := 0
	for _, r := range rows {
		args := []any{r.ID, r.TimeUnixNano, r.Caller, r.MCPSession, r.BrowserSession, r.Tool,
			r.Arguments, r.Result, r.DurationMicros, r.Outcome, r.TraceID, r.Source, r.Client, r.ArgumentsChars, r.ResultChars}
		if s.approval {
			args = append(args, r.Approval)
		}
		res, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return 0, fmt.Errorf("sqlite: insert audit record %s: %w", r.ID, err)
		}
		n, _ := res.RowsAffected()
		inserted += int(n)
	}
	if s.fts && inserted > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_fts (rowid, arguments, result)
			SELECT seq, arguments, result FROM audit WHERE seq > ?`, last); err != nil {
			return 0, fmt.Errorf("sqlite: index audit records: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	return inserted, nil
}

// dialect is the SQL of queries without text; withText adds the text
// filter.
var dialect = store.Dialect{Placeholder: func(int) string { return "?" }}

func withText(terms []string) store.Dialect {
	d := dialect
	d.Text = func(arg func(any) string, text string) string { return textMatch(arg, terms, text) }
	return d
}

// scanFirst is how many of the newest records a text query checks one by
// one before it asks the trigram index: a common text fills the page from
// them at once (the index would list a large part of the trail), a rare
// one costs these checks and then an index lookup that finds few.
const scanFirst = 1000

// QueryAudit implements store.Store.
func (s *Store) QueryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	f, err := store.ParseAuditQuery(q)
	if err != nil {
		return nil, err
	}
	// One read transaction: one snapshot for the statements of a text
	// search.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	defer tx.Rollback()
	d := dialect
	if !s.approval {
		d.Columns = store.AuditColumnsBeforeApproval
	}
	if f.Text == "" {
		query, args := store.AuditSQL(f, d)
		recs, err := queryRecords(ctx, tx, f.Limit+1, query, args)
		if err != nil {
			return nil, err
		}
		return store.AuditPage(f, recs), nil
	}

	var recs []*historyv1.AuditRecord
	rest := f
	if !f.Follow && s.scanFirst > 0 {
		// Check the newest scanFirst records that pass the other filters,
		// in order.
		others := f
		others.Text, others.Limit = "", s.scanFirst-1
		scan, args := store.AuditSQL(others, d)
		query := "SELECT * FROM (" + scan + ") WHERE " + textCheck(func(any) string { return "?" }, f.Text) +
			" ORDER BY time_unix_nano DESC, id DESC LIMIT ?"
		recs, err = queryRecords(ctx, tx, f.Limit+1, query, append(slices.Clone(args), f.Text, f.Limit+1))
		if err != nil || len(recs) > f.Limit {
			return store.AuditPage(f, recs), err
		}
		// Not a full page: the older records, through the index.
		var at int64
		var id string
		err = tx.QueryRowContext(ctx, "SELECT time_unix_nano, id FROM ("+scan+") ORDER BY time_unix_nano DESC, id DESC LIMIT 1 OFFSET ?",
			append(slices.Clone(args), s.scanFirst-1)...).Scan(&at, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return store.AuditPage(f, recs), nil // fewer than scanFirst: all checked
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: query audit: %w", err)
		}
		rest.HasCursor, rest.CursorTime, rest.CursorID = true, at, id
		rest.Limit = f.Limit - len(recs)
	}
	terms, err := pickTrigrams(ctx, tx, f.Text)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	text := withText(terms)
	text.Columns = d.Columns
	query, args := store.AuditSQL(rest, text)
	more, err := queryRecords(ctx, tx, rest.Limit+1, query, args)
	if err != nil {
		return nil, err
	}
	return store.AuditPage(f, append(recs, more...)), nil
}

func queryRecords(ctx context.Context, tx *sql.Tx, capacity int, query string, args []any) ([]*historyv1.AuditRecord, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	defer rows.Close()
	recs := make([]*historyv1.AuditRecord, 0, capacity)
	for rows.Next() {
		r, err := store.ScanAudit(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("sqlite: query audit: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: query audit: %w", err)
	}
	return recs, nil
}

// DeleteAuditBefore implements store.Store: the oldest records first (the
// text index follows by trigger).
func (s *Store) DeleteAuditBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: delete limit %d", store.ErrInvalid, limit)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM audit WHERE seq IN
		(SELECT seq FROM audit WHERE time_unix_nano < ? ORDER BY time_unix_nano LIMIT ?)`, before.UnixNano(), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete audit: %w", err)
	}
	return res.RowsAffected()
}
