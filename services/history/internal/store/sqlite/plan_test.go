package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// plan is the EXPLAIN QUERY PLAN of QueryAudit's statement for q (the
// index path of a text query), one line per step.
func plan(t *testing.T, s *Store, q *historyv1.AuditQuery) string {
	t.Helper()
	f, err := store.ParseAuditQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	query, args := store.AuditSQL(f, withText([]string{"nee", "dle"}))
	rows, err := s.r.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n")
}

// TestQueryPlans checks that every filter is served by its index and that
// no page sorts the matching records (SQLite has no statistics here, so its
// plans do not depend on the table's size).
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cursor := store.AuditCursor(5, "x")
	cases := []struct {
		q    *historyv1.AuditQuery
		want []string
		sort bool // a sort of the few candidates is expected
	}{
		{&historyv1.AuditQuery{}, []string{"SCAN audit USING INDEX audit_time"}, false},
		{&historyv1.AuditQuery{Cursor: cursor}, []string{"SEARCH audit USING INDEX audit_time ((time_unix_nano,id)<(?,?))"}, false},
		{&historyv1.AuditQuery{Session: "s"}, []string{"SEARCH audit USING INDEX audit_mcp_session (mcp_session=?)",
			"SEARCH audit USING INDEX audit_browser_session (browser_session=?)"}, false},
		{&historyv1.AuditQuery{Session: "s", Cursor: cursor}, []string{
			"SEARCH audit USING INDEX audit_mcp_session (mcp_session=? AND (time_unix_nano,id)<(?,?))",
			"SEARCH audit USING INDEX audit_browser_session (browser_session=? AND (time_unix_nano,id)<(?,?))"}, false},
		{&historyv1.AuditQuery{Tool: "t"}, []string{"SEARCH audit USING INDEX audit_tool (tool=?)"}, false},
		{&historyv1.AuditQuery{Caller: "c", Cursor: cursor}, []string{"SEARCH audit USING INDEX audit_caller (caller=? AND (time_unix_nano,id)<(?,?))"}, false},
		{&historyv1.AuditQuery{ErrorsOnly: true}, []string{"SCAN audit USING INDEX audit_errors"}, false},
		{&historyv1.AuditQuery{Text: "needle"}, []string{"audit_fts VIRTUAL TABLE"}, true},
		{&historyv1.AuditQuery{Session: "s", Text: "needle"}, []string{"audit_mcp_session", "audit_browser_session", "audit_fts VIRTUAL TABLE"}, false},
	}
	for _, c := range cases {
		p := plan(t, s, c.q)
		for _, w := range c.want {
			if !strings.Contains(p, w) {
				t.Errorf("%v: plan lacks %q:\n%s", c.q, w, p)
			}
		}
		if strings.Contains(p, "SCAN audit\n") || strings.HasSuffix(p, "SCAN audit") {
			t.Errorf("%v: full scan:\n%s", c.q, p)
		}
		if !c.sort && strings.Contains(p, "TEMP B-TREE FOR ORDER BY") && !strings.Contains(p, "UNION") {
			t.Errorf("%v: sorts:\n%s", c.q, p)
		}
		t.Logf("%v:\n%s", c.q, p)
	}
}
