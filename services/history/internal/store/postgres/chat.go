package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// CreateChatSession implements store.Store.
func (s *Store) CreateChatSession(ctx context.Context, id, title string) (*historyv1.ChatSession, error) {
	now := store.NowMilli()
	cs := &historyv1.ChatSession{Id: store.NewChatSessionID(id), Title: store.Clean(title), CreatedUnixMilli: now, UpdatedUnixMilli: now}
	tag, err := s.pool.Exec(ctx, `INSERT INTO chat_sessions (id, title, created_at, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO NOTHING`, cs.Id, cs.Title, now, now)
	if err != nil {
		return nil, wrap("create chat session", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("%w: chat session %s exists", store.ErrInvalid, cs.Id)
	}
	return cs, nil
}

// ListChatSessions implements store.Store.
func (s *Store) ListChatSessions(ctx context.Context, limit int, cursor string) ([]*historyv1.ChatSession, string, error) {
	limit = store.PageLimit(limit)
	query := `SELECT id, title, created_at, updated_at FROM chat_sessions ORDER BY updated_at DESC, id DESC LIMIT $1`
	args := []any{limit + 1}
	if cursor != "" {
		at, id, err := store.ParseChatCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		query = `SELECT id, title, created_at, updated_at FROM chat_sessions WHERE (updated_at, id) < ($1, $2)
			ORDER BY updated_at DESC, id DESC LIMIT $3`
		args = []any{at, store.Clean(id), limit + 1}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, "", wrap("list chat sessions", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*historyv1.ChatSession, error) {
		cs := &historyv1.ChatSession{}
		return cs, row.Scan(&cs.Id, &cs.Title, &cs.CreatedUnixMilli, &cs.UpdatedUnixMilli)
	})
	if err != nil {
		return nil, "", wrap("list chat sessions", err)
	}
	out, next := store.ChatPage(out, limit)
	return out, next, nil
}

// GetChatSession implements store.Store.
func (s *Store) GetChatSession(ctx context.Context, id string, lastN int) (*historyv1.ChatSession, []*historyv1.ChatMessage, error) {
	id, err := store.SessionID(id)
	if err != nil {
		return nil, nil, err
	}
	var (
		cs   *historyv1.ChatSession
		msgs []*historyv1.ChatMessage
	)
	// One snapshot for the session and its messages.
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		c := &historyv1.ChatSession{}
		err := tx.QueryRow(ctx, `SELECT id, title, created_at, updated_at FROM chat_sessions WHERE id = $1`, id).
			Scan(&c.Id, &c.Title, &c.CreatedUnixMilli, &c.UpdatedUnixMilli)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: chat session %s", store.ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, role, content, tool_calls, tool_call_id, created_at FROM chat_messages
			WHERE session_id = $1 ORDER BY id DESC LIMIT $2`, id, store.ChatMessageLimit(lastN))
		if err != nil {
			return err
		}
		msgs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*historyv1.ChatMessage, error) {
			m := &historyv1.ChatMessage{SessionId: c.Id}
			return m, row.Scan(&m.Id, &m.Role, &m.Content, &m.ToolCallsJson, &m.ToolCallId, &m.CreatedUnixMilli)
		})
		cs = c
		return err
	})
	if err != nil {
		return nil, nil, wrap("get chat session", err)
	}
	slices.Reverse(msgs)
	return cs, msgs, nil
}

// AppendChatMessages implements store.Store.
func (s *Store) AppendChatMessages(ctx context.Context, sessionID, title string, msgs []*historyv1.ChatMessage) ([]*historyv1.ChatMessage, error) {
	sessionID, err := store.SessionID(sessionID)
	if err != nil {
		return nil, err
	}
	now := store.NowMilli()
	out, err := store.NewChatMessages(sessionID, msgs, now)
	if err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE chat_sessions SET updated_at = $1,
			title = CASE WHEN $2::text = '' THEN title ELSE $2::text END WHERE id = $3`, now, store.Clean(title), sessionID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: chat session %s", store.ErrNotFound, sessionID)
		}
		if len(out) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		for _, m := range out {
			b.Queue(`INSERT INTO chat_messages (session_id, role, content, tool_calls, tool_call_id, created_at)
				VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, sessionID, m.Role, m.Content, m.ToolCallsJson, m.ToolCallId, m.CreatedUnixMilli).
				QueryRow(func(row pgx.Row) error { return row.Scan(&m.Id) })
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, wrap("append chat messages", err)
	}
	return out, nil
}

// DeleteChatSession implements store.Store; ErrNotFound when it does not
// exist.
func (s *Store) DeleteChatSession(ctx context.Context, id string) error {
	id, err := store.SessionID(id)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM chat_sessions WHERE id = $1`, id)
	if err != nil {
		return wrap("delete chat session", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: chat session %s", store.ErrNotFound, id)
	}
	return nil
}
