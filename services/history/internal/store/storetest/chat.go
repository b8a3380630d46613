package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

func testChatCreate(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	before := time.Now().UnixMilli()
	cs, err := s.CreateChatSession(ctx, "", "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(cs.GetId()); err != nil {
		t.Errorf("assigned id %q is not a UUID", cs.GetId())
	}
	if cs.GetTitle() != "first" || cs.GetCreatedUnixMilli() < before || cs.GetUpdatedUnixMilli() != cs.GetCreatedUnixMilli() {
		t.Errorf("created %v", cs)
	}
	named, err := s.CreateChatSession(ctx, "mine", "")
	if err != nil || named.GetId() != "mine" {
		t.Fatalf("create with an id: %v, %v", named, err)
	}
	if _, err := s.CreateChatSession(ctx, "mine", "again"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("create with an existing id: err = %v, want ErrInvalid", err)
	}
	got, msgs, err := s.GetChatSession(ctx, cs.GetId(), 0)
	if err != nil || got.GetTitle() != "first" || got.GetCreatedUnixMilli() != cs.GetCreatedUnixMilli() || len(msgs) != 0 {
		t.Errorf("get: %v %v %v", got, msgs, err)
	}
	if _, _, err := s.GetChatSession(ctx, "missing", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.GetChatSession(ctx, "", 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("get with an empty id: err = %v, want ErrInvalid", err)
	}
}

func msg(role, content string) *historyv1.ChatMessage {
	return &historyv1.ChatMessage{Role: role, Content: content}
}

func contents(msgs []*historyv1.ChatMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetContent()
	}
	return out
}

func testChatAppend(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	cs, err := s.CreateChatSession(ctx, "", "chat")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	given := &historyv1.ChatMessage{Role: "assistant", Content: "m2", ToolCallsJson: `[{"id":"c1"}]`, CreatedUnixMilli: 12345}
	out, err := s.AppendChatMessages(ctx, cs.GetId(), "", []*historyv1.ChatMessage{msg("system", "m0"), msg("user", "m1"), given})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d messages back", len(out))
	}
	for i, m := range out {
		if m.GetSessionId() != cs.GetId() || m.GetId() <= 0 || (i > 0 && m.GetId() <= out[i-1].GetId()) {
			t.Errorf("message %d: %v", i, m)
		}
	}
	if out[0].GetCreatedUnixMilli() <= cs.GetCreatedUnixMilli() || out[2].GetCreatedUnixMilli() != 12345 {
		t.Errorf("created times %d %d", out[0].GetCreatedUnixMilli(), out[2].GetCreatedUnixMilli())
	}
	tool := &historyv1.ChatMessage{Role: "tool", Content: "m3", ToolCallId: "c1"}
	more, err := s.AppendChatMessages(ctx, cs.GetId(), "renamed", []*historyv1.ChatMessage{tool, msg("assistant", "m4")})
	if err != nil {
		t.Fatal(err)
	}
	if more[0].GetId() <= out[2].GetId() {
		t.Errorf("ids do not increase across appends: %d after %d", more[0].GetId(), out[2].GetId())
	}
	got, msgs, err := s.GetChatSession(ctx, cs.GetId(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTitle() != "renamed" || got.GetUpdatedUnixMilli() <= cs.GetUpdatedUnixMilli() {
		t.Errorf("session after append: %v (created %v)", got, cs)
	}
	if c := contents(msgs); !slices.Equal(c, []string{"m0", "m1", "m2", "m3", "m4"}) {
		t.Errorf("messages %v", c)
	}
	if m := msgs[2]; m.GetToolCallsJson() != `[{"id":"c1"}]` || m.GetRole() != "assistant" || m.GetId() != out[2].GetId() || m.GetSessionId() != cs.GetId() {
		t.Errorf("message 2: %v", m)
	}
	if m := msgs[3]; m.GetToolCallId() != "c1" || m.GetRole() != "tool" {
		t.Errorf("message 3: %v", m)
	}
	_, last, err := s.GetChatSession(ctx, cs.GetId(), 2)
	if err != nil || !slices.Equal(contents(last), []string{"m3", "m4"}) {
		t.Errorf("last 2: %v, %v", contents(last), err)
	}
	_, last, _ = s.GetChatSession(ctx, cs.GetId(), 99)
	if len(last) != 5 {
		t.Errorf("last 99 of 5: %d", len(last))
	}
	// An empty title keeps the title; no messages only bumps the time.
	if _, err := s.AppendChatMessages(ctx, cs.GetId(), "", nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.GetChatSession(ctx, cs.GetId(), 1); got.GetTitle() != "renamed" {
		t.Errorf("title after an append without one: %q", got.GetTitle())
	}
	if _, err := s.AppendChatMessages(ctx, "missing", "", []*historyv1.ChatMessage{msg("user", "x")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to a missing session: err = %v, want ErrNotFound", err)
	}
	// Text is cleaned as audit text is.
	odd, err := s.AppendChatMessages(ctx, cs.GetId(), "", []*historyv1.ChatMessage{msg("user", "a\x00b\xff")})
	if err != nil || odd[0].GetContent() != "a\uFFFDb\uFFFD" {
		t.Errorf("invalid text: %v, %v", odd, err)
	}
}

func testChatAppendInvalid(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	cs, err := s.CreateChatSession(ctx, "", "chat")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendChatMessages(ctx, cs.GetId(), "new title", []*historyv1.ChatMessage{msg("user", "ok"), msg("robot", "bad")})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "robot") || !strings.Contains(err.Error(), strings.Join(store.Roles, ", ")) {
		t.Errorf("bad role: err = %v, want ErrInvalid naming the role and %v", err, store.Roles)
	}
	got, msgs, err := s.GetChatSession(ctx, cs.GetId(), 0)
	if err != nil || len(msgs) != 0 || got.GetTitle() != "chat" || got.GetUpdatedUnixMilli() != cs.GetUpdatedUnixMilli() {
		t.Errorf("after a refused batch: %v %v %v", got, contents(msgs), err)
	}
	if _, err := s.AppendChatMessages(ctx, "", "", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("append with an empty session id: err = %v", err)
	}
}

func testChatList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var order []string // newest update first
	for i := range 7 {
		cs, err := s.CreateChatSession(ctx, fmt.Sprintf("s%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		order = append([]string{cs.GetId()}, order...)
		time.Sleep(2 * time.Millisecond)
	}
	// Touch s2 and then s5: they become the newest.
	for _, id := range []string{"s2", "s5"} {
		time.Sleep(2 * time.Millisecond)
		if _, err := s.AppendChatMessages(ctx, id, "", []*historyv1.ChatMessage{msg("user", "hi")}); err != nil {
			t.Fatal(err)
		}
		order = append([]string{id}, slices.DeleteFunc(order, func(x string) bool { return x == id })...)
	}
	for _, limit := range []int{0, 1, 3, 7} {
		var got []string
		cursor := ""
		for range 20 {
			list, next, err := s.ListChatSessions(ctx, limit, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, cs := range list {
				got = append(got, cs.GetId())
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, order) {
			t.Errorf("list with limit %d: %v, want %v", limit, got, order)
		}
	}
	if _, _, err := s.ListChatSessions(ctx, 0, "nonsense"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad cursor: err = %v, want ErrInvalid", err)
	}
}

func testChatDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, id := range []string{"gone", "kept"} {
		if _, err := s.CreateChatSession(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendChatMessages(ctx, id, "", []*historyv1.ChatMessage{msg("user", id+"1"), msg("assistant", id+"2")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteChatSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetChatSession(ctx, "gone", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get deleted: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteChatSession(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete again: err = %v, want ErrNotFound", err)
	}
	// The messages went with it: a new session of the same id is empty.
	if _, err := s.CreateChatSession(ctx, "gone", ""); err != nil {
		t.Fatal(err)
	}
	if _, msgs, err := s.GetChatSession(ctx, "gone", 0); err != nil || len(msgs) != 0 {
		t.Errorf("recreated session has %v, %v", contents(msgs), err)
	}
	if _, msgs, err := s.GetChatSession(ctx, "kept", 0); err != nil || !slices.Equal(contents(msgs), []string{"kept1", "kept2"}) {
		t.Errorf("other session: %v, %v", contents(msgs), err)
	}
}
