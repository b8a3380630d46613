package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

// MaxChatContent bounds one chat message's content and tool calls (bytes):
// a request must fit NATS's payload limit, and the agent trims tool results
// before it stores them.
const MaxChatContent = 256 << 10

// Subjects of the history endpoints, under the bus prefix.
const (
	SubjectAuditQuery = "history.audit.query"
	SubjectChatCreate = "history.chat.create"
	SubjectChatList   = "history.chat.list"
	SubjectChatGet    = "history.chat.get"
	SubjectChatAppend = "history.chat.append"
	SubjectChatDelete = "history.chat.delete"
)

// register adds the micro service "sovereign-history" with its endpoints;
// replicas share them through the default queue group.
func (s *Service) register() error {
	svc, err := s.bus.AddService("sovereign-history", Version, "Sovereign audit trail (operators) and agent chat history",
		map[string]string{"backend": s.kind})
	if err != nil {
		return fmt.Errorf("history service: %w", err)
	}
	s.svc = svc
	c := s.bus
	audit := svc.AddGroup(historybus.AuditGroup(c))
	chat := svc.AddGroup(historybus.ChatGroup(c))
	for _, e := range []struct {
		g    micro.Group
		name string
		h    micro.Handler
	}{
		{audit, historybus.AuditQuery.Name, bus.Handle(c, s.queryAudit)},
		{chat, historybus.ChatCreate.Name, bus.Handle(c, s.createChat)},
		{chat, historybus.ChatList.Name, bus.Handle(c, s.listChats)},
		{chat, historybus.ChatGet.Name, bus.Handle(c, s.getChat)},
		{chat, historybus.ChatAppend.Name, bus.Handle(c, s.appendChat)},
		{chat, historybus.ChatDelete.Name, bus.Handle(c, s.deleteChat)},
	} {
		if err := e.g.AddEndpoint(e.name, e.h); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("history endpoint %s: %w", e.name, err)
		}
	}
	return nil
}

// busError maps store errors to bus codes.
func busError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrInvalid):
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s", err.Error())
	case errors.Is(err, store.ErrNotFound):
		return bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "%s", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "history database: %s", err.Error())
	}
	return err
}

func (s *Service) queryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	if q.GetLimit() < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "limit %d: must be 0 (default %d) to %d", q.GetLimit(), store.DefaultPage, store.MaxPage)
	}
	if q.GetSinceUnixNano() > 0 && q.GetUntilUnixNano() > 0 && q.GetUntilUnixNano() <= q.GetSinceUnixNano() {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "until must be after since")
	}
	p, err := s.store.QueryAudit(ctx, q)
	return p, busError(err)
}

func (s *Service) createChat(ctx context.Context, r *historyv1.CreateChatSessionRequest) (*historyv1.ChatSession, error) {
	cs, err := s.store.CreateChatSession(ctx, r.GetId(), r.GetTitle())
	return cs, busError(err)
}

func (s *Service) listChats(ctx context.Context, r *historyv1.ListChatSessionsRequest) (*historyv1.ListChatSessionsResponse, error) {
	if r.GetLimit() < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "limit %d: must not be negative", r.GetLimit())
	}
	list, next, err := s.store.ListChatSessions(ctx, int(r.GetLimit()), r.GetCursor())
	if err != nil {
		return nil, busError(err)
	}
	return &historyv1.ListChatSessionsResponse{Sessions: list, NextCursor: next}, nil
}

func (s *Service) getChat(ctx context.Context, r *historyv1.GetChatSessionRequest) (*historyv1.GetChatSessionResponse, error) {
	if r.GetId() == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "id is required")
	}
	if r.GetLastMessages() < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "last_messages %d: must not be negative", r.GetLastMessages())
	}
	cs, msgs, err := s.store.GetChatSession(ctx, r.GetId(), int(r.GetLastMessages()))
	if err != nil {
		return nil, busError(err)
	}
	return &historyv1.GetChatSessionResponse{Session: cs, Messages: msgs}, nil
}

func (s *Service) appendChat(ctx context.Context, r *historyv1.AppendChatMessagesRequest) (*historyv1.AppendChatMessagesResponse, error) {
	if r.GetSessionId() == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "session_id is required")
	}
	if len(r.GetMessages()) == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "no messages to append")
	}
	for i, m := range r.GetMessages() {
		if n := len(m.GetContent()) + len(m.GetToolCallsJson()); n > MaxChatContent {
			return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "message %d is %d bytes; at most %d (trim tool results before storing them)", i, n, MaxChatContent)
		}
	}
	msgs, err := s.store.AppendChatMessages(ctx, r.GetSessionId(), r.GetTitle(), r.GetMessages())
	if err != nil {
		return nil, busError(err)
	}
	return &historyv1.AppendChatMessagesResponse{Messages: msgs}, nil
}

func (s *Service) deleteChat(ctx context.Context, r *historyv1.DeleteChatSessionRequest) (*historyv1.DeleteChatSessionResponse, error) {
	if r.GetId() == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "id is required")
	}
	return &historyv1.DeleteChatSessionResponse{}, busError(s.store.DeleteChatSession(ctx, r.GetId()))
}
