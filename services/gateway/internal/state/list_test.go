package state

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestListAndModifyKey(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := context.Background()

	if got, err := s.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty bucket = %v, %v; want none", got, err)
	}
	id, h := NewSessionID(), NewHandle()
	if _, err := s.Create(ctx, MCP, id, Record{Owner: "anonymous", WorkerID: "w1", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, Handle, h, Record{Owner: "sha256:ab"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("List = %v, %v; want 2 records", got, err)
	}
	var mcpKey string
	for _, l := range got {
		if !ValidKey(l.Key) || strings.Contains(l.Key, id) || strings.Contains(l.Key, h) {
			t.Errorf("listed key %q: want a digest key without the id", l.Key)
		}
		switch l.Kind {
		case MCP:
			mcpKey = l.Key
			if l.WorkerID != "w1" || l.SessionID != "s1" || l.Owner != "anonymous" {
				t.Errorf("mcp record = %+v", l.Record)
			}
		case Handle:
			if l.Owner != "sha256:ab" || l.Bound() {
				t.Errorf("handle record = %+v", l.Record)
			}
		default:
			t.Errorf("listed kind %q", l.Kind)
		}
	}

	l, err := s.ModifyKey(ctx, mcpKey, func(r *Record) bool {
		r.WorkerID, r.SessionID = "", ""
		return true
	})
	if err != nil || l.Bound() {
		t.Fatalf("ModifyKey = %+v, %v; want the record unbound", l, err)
	}
	// The id's own reads see the change (mirror and bucket agree).
	if e, err := s.Get(ctx, MCP, id); err != nil || e.Bound() || e.Revision != l.Revision {
		t.Fatalf("Get after ModifyKey = %+v, %v; want unbound at revision %d", e, err, l.Revision)
	}
	missing := "mcp." + strings.Repeat("0", 64)
	if _, err := s.ModifyKey(ctx, missing, func(*Record) bool { return true }); !errors.Is(err, ErrNotFound) {
		t.Errorf("ModifyKey(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := s.ModifyKey(ctx, id, func(*Record) bool { return true }); !errors.Is(err, ErrNotFound) {
		t.Errorf("ModifyKey(a session id instead of a key) error = %v, want ErrNotFound", err)
	}
}
