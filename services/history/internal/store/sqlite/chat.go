package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// CreateChatSession implements store.Store.
func (s *Store) CreateChatSession(ctx context.Context, id, title string) (*historyv1.ChatSession, error) {
	now := store.NowMilli()
	cs := &historyv1.ChatSession{Id: store.NewChatSessionID(id), Title: store.Clean(title), CreatedUnixMilli: now, UpdatedUnixMilli: now}
	res, err := s.w.ExecContext(ctx, `INSERT INTO chat_sessions (id, title, created_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, cs.Id, cs.Title, now, now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: create chat session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("%w: chat session %s exists", store.ErrInvalid, cs.Id)
	}
	return cs, nil
}

// ListChatSessions implements store.Store.
func (s *Store) ListChatSessions(ctx context.Context, limit int, cursor string) ([]*historyv1.ChatSession, string, error) {
	limit = store.PageLimit(limit)
	query := `SELECT id, title, created_at, updated_at FROM chat_sessions ORDER BY updated_at DESC, id DESC LIMIT ?`
	args := []any{limit + 1}
	if cursor != "" {
		at, id, err := store.ParseChatCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		query = `SELECT id, title, created_at, updated_at FROM chat_sessions WHERE (updated_at, id) < (?, ?)
			ORDER BY updated_at DESC, id DESC LIMIT ?`
		args = []any{at, id, limit + 1}
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list chat sessions: %w", err)
	}
	defer rows.Close()
	var out []*historyv1.ChatSession
	for rows.Next() {
		cs := &historyv1.ChatSession{}
		if err := rows.Scan(&cs.Id, &cs.Title, &cs.CreatedUnixMilli, &cs.UpdatedUnixMilli); err != nil {
			return nil, "", fmt.Errorf("sqlite: list chat sessions: %w", err)
		}
		out = append(out, cs)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list chat sessions: %w", err)
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
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: get chat session: %w", err)
	}
	defer tx.Rollback()
	cs := &historyv1.ChatSession{}
	err = tx.QueryRowContext(ctx, `SELECT id, title, created_at, updated_at FROM chat_sessions WHERE id = ?`, id).
		Scan(&cs.Id, &cs.Title, &cs.CreatedUnixMilli, &cs.UpdatedUnixMilli)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("%w: chat session %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: get chat session: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, role, content, tool_calls, tool_call_id, created_at FROM chat_messages
		WHERE session_id = ? ORDER BY id DESC LIMIT ?`, id, store.ChatMessageLimit(lastN))
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite: get chat session: %w", err)
	}
	defer rows.Close()
	var msgs []*historyv1.ChatMessage
	for rows.Next() {
		m := &historyv1.ChatMessage{SessionId: cs.Id}
		if err := rows.Scan(&m.Id, &m.Role, &m.Content, &m.ToolCallsJson, &m.ToolCallId, &m.CreatedUnixMilli); err != nil {
			return nil, nil, fmt.Errorf("sqlite: get chat session: %w", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlite: get chat session: %w", err)
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
	now, title := store.NowMilli(), store.Clean(title)
	out, err := store.NewChatMessages(sessionID, msgs, now)
	if err != nil {
		return nil, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: append chat messages: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE chat_sessions SET updated_at = ?,
		title = CASE WHEN ? = '' THEN title ELSE ? END WHERE id = ?`, now, title, title, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: append chat messages: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("%w: chat session %s", store.ErrNotFound, sessionID)
	}
	for _, m := range out {
		res, err := tx.ExecContext(ctx, `INSERT INTO chat_messages (session_id, role, content, tool_calls, tool_call_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, sessionID, m.Role, m.Content, m.ToolCallsJson, m.ToolCallId, m.CreatedUnixMilli)
		if err != nil {
			return nil, fmt.Errorf("sqlite: append chat messages: %w", err)
		}
		if m.Id, err = res.LastInsertId(); err != nil {
			return nil, fmt.Errorf("sqlite: append chat messages: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: append chat messages: %w", err)
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
	res, err := s.w.ExecContext(ctx, `DELETE FROM chat_sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete chat session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: chat session %s", store.ErrNotFound, id)
	}
	return nil
}
