package store

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

func TestTruncate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in        string
		n         int
		out       string
		charCount int
	}{
		{"", 3, "", 0},
		{"abc", 3, "abc", 3},
		{"abcd", 3, "abc", 4},
		{"日本語です", 2, "日本", 5},
		{"é\xffz", 2, "é\uFFFD", 3},
		{"a\x00b", 5, "a\uFFFDb", 3},
		{"😀😀😀", 1, "😀", 3},
	}
	for _, c := range cases {
		out, n := Truncate(c.in, c.n)
		if out != c.out || n != c.charCount || !utf8.ValidString(out) {
			t.Errorf("Truncate(%q, %d) = %q, %d; want %q, %d", c.in, c.n, out, n, c.out, c.charCount)
		}
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	c := AuditCursor(-42, "id:with:colons")
	at, id, err := ParseAuditCursor(c)
	if err != nil || at != -42 || id != "id:with:colons" {
		t.Errorf("round trip: %d %q %v", at, id, err)
	}
	if strings.ContainsAny(c, "+/=") {
		t.Errorf("cursor %q is not URL-safe", c)
	}
	for _, bad := range []string{"", "!", ChatCursor(1, "x"), "YQ", "YTE6", "YXg6eQ"} {
		if _, _, err := ParseAuditCursor(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAuditCursor(%q): %v", bad, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{-1: DefaultPage, 0: DefaultPage, 1: 1, MaxPage: MaxPage, MaxPage + 1: MaxPage} {
		if got := PageLimit(in); got != want {
			t.Errorf("PageLimit(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestOutcomeNames(t *testing.T) {
	t.Parallel()
	for o := range historyv1.Outcome_name {
		if got := ParseOutcome(OutcomeName(historyv1.Outcome(o))); got != historyv1.Outcome(o) {
			t.Errorf("outcome %d comes back as %v", o, got)
		}
	}
	if OutcomeName(99) != "unspecified" || ParseOutcome("weird") != historyv1.Outcome_OUTCOME_UNSPECIFIED {
		t.Error("unknown outcomes are not unspecified")
	}
}

func TestAuditSQLSession(t *testing.T) {
	t.Parallel()
	f, err := ParseAuditQuery(&historyv1.AuditQuery{Session: "s", Tool: "t", Cursor: AuditCursor(5, "x")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	q, args := AuditSQL(f, Dialect{Placeholder: func(int) string { n++; return "?" }})
	if strings.Count(q, "?") != len(args) || n != len(args) {
		t.Errorf("%d placeholders for %d arguments: %s", strings.Count(q, "?"), len(args), q)
	}
	if !strings.Contains(q, "mcp_session = ?") || !strings.Contains(q, "browser_session = ?") || !strings.Contains(q, " UNION ") {
		t.Errorf("session query is not a union of the two session indexes: %s", q)
	}
}
