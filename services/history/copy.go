package history

import (
	"context"
	"errors"
	"fmt"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// CopyStats is what Copy moved.
type CopyStats struct {
	Audit, AuditNew       int
	ChatSessions, ChatNew int
	ChatMessages          int
}

// Copy copies the audit trail and the chat store from one database to
// another (for moving from SQLite to PostgreSQL), each named as
// SOVEREIGN_HISTORY_DSN names one. It can run again: audit records already
// in the target are skipped by id, and chat sessions already there are
// left alone. Chat messages get new ids in the target but keep their times
// and order; sessions keep their ids and titles. progress, when set, is
// called after every page.
func Copy(ctx context.Context, from, to string, progress func(CopyStats)) (CopyStats, error) {
	var st CopyStats
	if from == to {
		return st, errors.New("copy: source and target are the same database")
	}
	src, _, err := openStore(ctx, Config{DSN: from})
	if err != nil {
		return st, fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, _, err := openStore(ctx, Config{DSN: to})
	if err != nil {
		return st, fmt.Errorf("target: %w", err)
	}
	defer dst.Close()

	// Audit: in seq order, a page at a time.
	var after int64
	for {
		page, err := src.QueryAudit(ctx, &historyv1.AuditQuery{Follow: true, AfterSeq: after, Limit: store.MaxPage})
		if err != nil {
			return st, fmt.Errorf("read audit records after seq %d: %w", after, err)
		}
		recs := page.GetRecords()
		if len(recs) == 0 {
			break
		}
		after = recs[len(recs)-1].GetSeq()
		n, err := dst.InsertAudit(ctx, recs)
		if err != nil {
			return st, fmt.Errorf("write audit records: %w", err)
		}
		st.Audit += len(recs)
		st.AuditNew += n
		if progress != nil {
			progress(st)
		}
	}

	// Chat: every session with all its messages.
	cursor := ""
	for {
		sessions, next, err := src.ListChatSessions(ctx, store.MaxPage, cursor)
		if err != nil {
			return st, fmt.Errorf("list chat sessions: %w", err)
		}
		for _, cs := range sessions {
			st.ChatSessions++
			if _, _, err := dst.GetChatSession(ctx, cs.GetId(), 1); err == nil {
				continue // copied before
			}
			_, msgs, err := src.GetChatSession(ctx, cs.GetId(), 0)
			if err != nil {
				return st, fmt.Errorf("read chat session %s: %w", cs.GetId(), err)
			}
			if _, err := dst.CreateChatSession(ctx, cs.GetId(), cs.GetTitle()); err != nil {
				return st, fmt.Errorf("create chat session %s: %w", cs.GetId(), err)
			}
			for i := 0; i < len(msgs); i += store.MaxPage {
				batch := msgs[i:min(i+store.MaxPage, len(msgs))]
				for _, m := range batch {
					m.Id = 0
				}
				if _, err := dst.AppendChatMessages(ctx, cs.GetId(), "", batch); err != nil {
					return st, fmt.Errorf("copy messages of chat session %s: %w", cs.GetId(), err)
				}
			}
			st.ChatNew++
			st.ChatMessages += len(msgs)
		}
		if progress != nil {
			progress(st)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return st, nil
}
