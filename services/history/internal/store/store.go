// Package store is the history service's storage: one small interface with
// two backends, SQLite (store/sqlite, the embedded default) and PostgreSQL
// (store/postgres, for several history replicas on one database). Both pass
// the same suite (store/storetest).
package store

import (
	"context"
	"errors"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
)

// Limits shared by every backend.
const (
	// MaxArgumentChars and MaxResultChars are the stored prefix lengths of
	// a record's arguments and result (in characters, not bytes).
	MaxArgumentChars = audit.MaxArgumentChars
	MaxResultChars   = audit.MaxResultChars
	// DefaultPage and MaxPage bound AuditQuery.limit and chat listings.
	DefaultPage = 50
	MaxPage     = 1000
	// MinTextSearch is the shortest text filter (trigram indexes need 3).
	MinTextSearch = 3
	// MaxChatMessages bounds GetChatSession.
	MaxChatMessages = 10000
)

// Roles a chat message may have.
var Roles = []string{"user", "assistant", "tool", "system"}

// Errors every backend returns (wrapped) so the service can map them to bus
// error codes.
var (
	// ErrInvalid is a request that cannot be served as given (bad cursor,
	// short text filter, unknown role, empty id, …).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound is a chat session that does not exist.
	ErrNotFound = errors.New("not found")
)

// Store is what the history service needs from a database. Every method is
// safe for concurrent use; several processes may share one PostgreSQL
// database.
type Store interface {
	// InsertAudit stores records in one transaction. A record whose id is
	// already stored is skipped (redelivery), and inserted counts the new
	// ones. Each stored record gets the next seq. Arguments and result
	// longer than the limits are truncated (in characters) and their
	// original lengths kept (when the record does not carry them already);
	// invalid UTF-8 and NUL bytes become U+FFFD (see Clean) in every
	// backend; records are otherwise stored as given (the caller validates
	// and redacts). A record without id fails the batch with ErrInvalid.
	InsertAudit(ctx context.Context, recs []*historyv1.AuditRecord) (inserted int, err error)
	// QueryAudit returns one page of records matching q, newest first by
	// (time, id), with a cursor for the next page that stays correct while
	// new records arrive. With q.AfterSeq > 0 it returns records with a
	// larger seq, oldest first, and no cursor (q.Cursor is ignored). The
	// text filter is a case-insensitive substring of the arguments or the
	// result (PostgreSQL folds case as the database's ctype does: use a
	// UTF-8 locale for more than ASCII). ErrInvalid: a text shorter than
	// MinTextSearch characters, a cursor this store did not make.
	QueryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error)
	// DeleteAuditBefore deletes at most limit records older than before and
	// returns how many it deleted, oldest first; retention calls it in a
	// loop so writers are never blocked for long. limit < 1 is ErrInvalid.
	DeleteAuditBefore(ctx context.Context, before time.Time, limit int) (int64, error)

	// CreateChatSession stores a new session (id assigned when empty;
	// ErrInvalid when the id exists).
	CreateChatSession(ctx context.Context, id, title string) (*historyv1.ChatSession, error)
	// ListChatSessions lists sessions by updated time, newest first.
	ListChatSessions(ctx context.Context, limit int, cursor string) (sessions []*historyv1.ChatSession, next string, err error)
	// GetChatSession returns a session and its last lastN messages (0: all,
	// capped at MaxChatMessages), oldest first; ErrNotFound when missing.
	GetChatSession(ctx context.Context, id string, lastN int) (*historyv1.ChatSession, []*historyv1.ChatMessage, error)
	// AppendChatMessages appends msgs in order in one transaction, assigns
	// ids and created times, bumps the session's updated time and, when
	// title is not empty, renames it. ErrNotFound when the session is
	// missing; ErrInvalid for an unknown role.
	AppendChatMessages(ctx context.Context, sessionID, title string, msgs []*historyv1.ChatMessage) ([]*historyv1.ChatMessage, error)
	// DeleteChatSession deletes a session and its messages; ErrNotFound
	// when it does not exist. (An empty session id is ErrInvalid for every
	// chat method that takes one.)
	DeleteChatSession(ctx context.Context, id string) error

	// SchemaVersion is the applied migration version.
	SchemaVersion(ctx context.Context) (int, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error
}
