// Package storetest is the conformance suite every store backend passes:
// the backend's tests call Run with a function that opens a new, empty
// store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// Option adds to the suite.
type Option func(*config)

type config struct {
	reopen func(t *testing.T) func(version int) (store.Store, error)
}

// Upgrade lets the suite test migrations: reopen makes a new, empty database
// for t and returns a function that opens it migrated up to version
// (store.LatestSchema: what the backend's Open does), safe to call from
// several goroutines at once. The stores it returns must be closed by the
// backend when t ends; the suite may close them earlier.
func Upgrade(reopen func(t *testing.T) func(version int) (store.Store, error)) Option {
	return func(c *config) { c.reopen = reopen }
}

// Run runs the suite; open returns a new, empty store (closed by the
// backend when t ends). Subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SchemaAndPing", testSchemaAndPing},
		{"Filters", testFilters},
		{"TimeBounds", testTimeBounds},
		{"Text", testText},
		{"TextTooShort", testTextTooShort},
		{"Pagination", testPagination},
		{"PaginationStable", testPaginationStable},
		{"Limits", testLimits},
		{"BadCursor", testBadCursor},
		{"AfterSeq", testAfterSeq},
		{"Duplicates", testDuplicates},
		{"Fields", testFields},
		{"Approval", testApproval},
		{"Truncation", testTruncation},
		{"InvalidText", testInvalidText},
		{"EmptyID", testEmptyID},
		{"DeleteBefore", testDeleteBefore},
		{"ConcurrentInsert", testConcurrentInsert},
		{"ChatCreate", testChatCreate},
		{"ChatAppend", testChatAppend},
		{"ChatAppendInvalid", testChatAppendInvalid},
		{"ChatList", testChatList},
		{"ChatDelete", testChatDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
	for name, fn := range map[string]func(*testing.T, func(int) (store.Store, error)){
		"Upgrade": testUpgrade, "ConcurrentOpen": testConcurrentOpen,
	} {
		t.Run(name, func(t *testing.T) {
			if c.reopen == nil {
				t.Skip("the backend gives no storetest.Upgrade")
			}
			t.Parallel()
			fn(t, c.reopen(t))
		})
	}
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func insert(t *testing.T, s store.Store, recs []*historyv1.AuditRecord) int {
	t.Helper()
	n, err := s.InsertAudit(ctxT(t), recs)
	if err != nil {
		t.Fatalf("InsertAudit: %v", err)
	}
	return n
}

func query(t *testing.T, s store.Store, q *historyv1.AuditQuery) *historyv1.AuditPage {
	t.Helper()
	p, err := s.QueryAudit(ctxT(t), q)
	if err != nil {
		t.Fatalf("QueryAudit(%v): %v", q, err)
	}
	return p
}

// walk follows the cursor from q to the end and returns every record.
func walk(t *testing.T, s store.Store, q *historyv1.AuditQuery) []*historyv1.AuditRecord {
	t.Helper()
	var all []*historyv1.AuditRecord
	q = cloneQuery(q)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("walk does not end")
		}
		p := query(t, s, q)
		all = append(all, p.GetRecords()...)
		if p.GetNextCursor() == "" {
			return all
		}
		if len(p.GetRecords()) == 0 {
			t.Fatalf("empty page with a next cursor for %v", q)
		}
		q.Cursor = p.GetNextCursor()
	}
}

func cloneQuery(q *historyv1.AuditQuery) *historyv1.AuditQuery {
	return &historyv1.AuditQuery{SinceUnixNano: q.SinceUnixNano, UntilUnixNano: q.UntilUnixNano, Tool: q.Tool,
		Session: q.Session, Caller: q.Caller, ErrorsOnly: q.ErrorsOnly, Text: q.Text, Limit: q.Limit, Cursor: q.Cursor,
		AfterSeq: q.AfterSeq}
}

func ids(recs []*historyv1.AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.GetId()
	}
	return out
}

// reference is what QueryAudit must return for q (without paging), from
// the records as given (ASCII text, so no cleaning or case-folding
// questions).
func reference(recs []*historyv1.AuditRecord, q *historyv1.AuditQuery) []string {
	var out []*historyv1.AuditRecord
	for _, r := range recs {
		switch {
		case q.SinceUnixNano != 0 && r.TimeUnixNano < q.SinceUnixNano,
			q.UntilUnixNano != 0 && r.TimeUnixNano >= q.UntilUnixNano,
			q.Tool != "" && r.Tool != q.Tool,
			q.Caller != "" && r.Caller != q.Caller,
			q.Session != "" && r.McpSession != q.Session && r.BrowserSession != q.Session,
			q.ErrorsOnly && r.Outcome == historyv1.Outcome_OUTCOME_OK,
			q.Text != "" && !strings.Contains(strings.ToLower(r.Arguments), strings.ToLower(q.Text)) &&
				!strings.Contains(strings.ToLower(r.Result), strings.ToLower(q.Text)):
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, newestFirst)
	return ids(out)
}

func newestFirst(a, b *historyv1.AuditRecord) int {
	if a.TimeUnixNano != b.TimeUnixNano {
		if a.TimeUnixNano > b.TimeUnixNano {
			return -1
		}
		return 1
	}
	return -strings.Compare(a.Id, b.Id)
}

func equalIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %d records %v,\nwant %d %v", what, len(got), head(got), len(want), head(want))
	}
}

func head(s []string) []string {
	if len(s) > 12 {
		return append(slices.Clip(s[:12]), "…")
	}
	return s
}

// dataset is a small trail with every kind of value the filters look at:
// times that tie (ordered by id), a session that is both an MCP and a
// browser session (and one record where both columns hold it), every
// outcome, mixed-case text.
func dataset() []*historyv1.AuditRecord {
	tools := []string{"navigate", "click", "fill"}
	callers := []string{"alice", "bob"}
	mcps := []string{"m1", "m2", ""}
	browsers := []string{"b1", "b2", "m1", ""}
	outcomes := []historyv1.Outcome{historyv1.Outcome_OUTCOME_OK, historyv1.Outcome_OUTCOME_OK, historyv1.Outcome_OUTCOME_ERROR,
		historyv1.Outcome_OUTCOME_OK, historyv1.Outcome_OUTCOME_DENIED, historyv1.Outcome_OUTCOME_TIMEOUT, historyv1.Outcome_OUTCOME_UNSPECIFIED}
	words := []string{"Alpha", "beta", "GAMMA", "delta", "epsilon"}
	var recs []*historyv1.AuditRecord
	for i := range 60 {
		recs = append(recs, &historyv1.AuditRecord{
			// Ids do not sort like times; every third record ties in time
			// with the one before.
			Id:             fmt.Sprintf("id-%02d", (i*37)%60),
			TimeUnixNano:   base.Add(time.Duration(i-i%3/2) * time.Second).UnixNano(),
			Caller:         callers[i%len(callers)],
			McpSession:     mcps[i%len(mcps)],
			BrowserSession: browsers[i%len(browsers)],
			Tool:           tools[i%len(tools)],
			Arguments:      fmt.Sprintf(`{"word":%q,"n":%d}`, words[i%len(words)], i),
			Result:         fmt.Sprintf("result %d says %s", i, words[(i/2)%len(words)]),
			Outcome:        outcomes[i%len(outcomes)],
			Source:         "gateway",
		})
	}
	return recs
}

func testSchemaAndPing(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != store.LatestSchema {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, store.LatestSchema)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func testFilters(t *testing.T, s store.Store) {
	recs := dataset()
	if n := insert(t, s, recs); n != len(recs) {
		t.Fatalf("inserted %d, want %d", n, len(recs))
	}
	mid := base.Add(20 * time.Second).UnixNano()
	late := base.Add(40 * time.Second).UnixNano()
	queries := []*historyv1.AuditQuery{
		{},
		{Tool: "click"},
		{Tool: "nope"},
		{Caller: "bob"},
		{Session: "m1"}, // MCP session m1 or browser session m1
		{Session: "b2"},
		{Session: "m2"},
		{ErrorsOnly: true},
		{Text: "alpha"},
		{Text: "ULT 1"},
		{SinceUnixNano: mid},
		{UntilUnixNano: mid},
		{SinceUnixNano: mid, UntilUnixNano: late},
		{Tool: "fill", Caller: "alice"},
		{Session: "m1", Tool: "navigate"},
		{Session: "m1", ErrorsOnly: true},
		{Session: "b1", Text: "GAMMA", Caller: "bob"},
		{Session: "m1", SinceUnixNano: mid, UntilUnixNano: late},
		{Text: "beta", ErrorsOnly: true, UntilUnixNano: late},
		{Tool: "click", Caller: "alice", Session: "m2", ErrorsOnly: true, Text: "says", SinceUnixNano: mid},
	}
	for _, q := range queries {
		want := reference(recs, q)
		q.Limit = 100
		equalIDs(t, fmt.Sprintf("%v", q), ids(query(t, s, q).GetRecords()), want)
		q.Limit = 4
		equalIDs(t, fmt.Sprintf("pages of %v", q), ids(walk(t, s, q)), want)
	}
	// The record whose MCP and browser sessions are both m1 comes once.
	both := 0
	for _, r := range recs {
		if r.McpSession == "m1" && r.BrowserSession == "m1" {
			both++
		}
	}
	if both == 0 {
		t.Fatal("dataset has no record with both sessions m1")
	}
}

func testTimeBounds(t *testing.T, s store.Store) {
	var recs []*historyv1.AuditRecord
	for i := range 5 {
		recs = append(recs, &historyv1.AuditRecord{Id: fmt.Sprintf("t%d", i), TimeUnixNano: int64(1000 + i)})
	}
	insert(t, s, recs)
	// since is inclusive, until exclusive.
	equalIDs(t, "since 1001 until 1003", ids(query(t, s, &historyv1.AuditQuery{SinceUnixNano: 1001, UntilUnixNano: 1003}).GetRecords()),
		[]string{"t2", "t1"})
}

func testText(t *testing.T, s store.Store) {
	texts := map[string]string{
		"pct":     `{"discount":"100%"}`,
		"thousnd": `{"discount":"1000"}`,
		"under":   `{"name":"a_b_c"}`,
		"nounder": `{"name":"axbxc"}`,
		"quote":   `it's "quoted" here`,
		"slash":   `C:\path\to`,
		"fts":     `NEAR(a b) AND col:x OR y* ^z`,
		"upper":   `HELLO World`,
		"multi":   `grüße aus Köln`,
	}
	var recs []*historyv1.AuditRecord
	i := 0
	for id, text := range texts {
		r := &historyv1.AuditRecord{Id: id, TimeUnixNano: base.Add(time.Duration(i) * time.Second).UnixNano()}
		// Half in the arguments, half in the result: both are searched.
		if i%2 == 0 {
			r.Arguments = text
		} else {
			r.Result = text
		}
		recs = append(recs, r)
		i++
	}
	insert(t, s, recs)
	cases := []struct {
		text string
		want []string
	}{
		{"100%", []string{"pct"}},
		{"00%", []string{"pct"}},
		{"%%%", nil},
		{"a_b", []string{"under"}},
		{"___", nil},
		{"_b_", []string{"under"}},
		{`it's`, []string{"quote"}},
		{`"quoted"`, []string{"quote"}},
		{`s "q`, []string{"quote"}},
		{`\path\`, []string{"slash"}},
		{`C:\p`, []string{"slash"}},
		{`NEAR(a`, []string{"fts"}},
		{`y* ^z`, []string{"fts"}},
		{`col:x`, []string{"fts"}},
		{"hello world", []string{"upper"}},
		{"wOrL", []string{"upper"}},
		{"üße", []string{"multi"}},
		{"köln", []string{"multi"}},
		{"AUS KÖLN", []string{"multi"}},
		{"nothing here", nil},
	}
	for _, c := range cases {
		got := ids(query(t, s, &historyv1.AuditQuery{Text: c.text}).GetRecords())
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("text %q: got %v, want %v", c.text, got, c.want)
		}
	}
}

func testTextTooShort(t *testing.T, s store.Store) {
	for _, text := range []string{"ab", "é", "日本"} {
		_, err := s.QueryAudit(ctxT(t), &historyv1.AuditQuery{Text: text})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint(store.MinTextSearch)) {
			t.Errorf("text %q: err = %v, want ErrInvalid naming %d", text, err, store.MinTextSearch)
		}
	}
	// Three characters of several bytes each are enough.
	if _, err := s.QueryAudit(ctxT(t), &historyv1.AuditQuery{Text: "日本語"}); err != nil {
		t.Errorf("text of three characters: %v", err)
	}
}

// many makes n records with every fifth time shared by two records.
func many(prefix string, n int, from time.Time) []*historyv1.AuditRecord {
	recs := make([]*historyv1.AuditRecord, n)
	for i := range recs {
		recs[i] = &historyv1.AuditRecord{
			Id:             fmt.Sprintf("%s-%04d", prefix, (i*7919)%n),
			TimeUnixNano:   from.Add(time.Duration(i-i%5/4) * time.Millisecond).UnixNano(),
			Tool:           []string{"click", "fill"}[i%2],
			BrowserSession: []string{"s1", "s2", "s3"}[i%3],
			Arguments:      fmt.Sprintf(`{"n":%d}`, i),
			Outcome:        historyv1.Outcome_OUTCOME_OK,
		}
	}
	return recs
}

func testPagination(t *testing.T, s store.Store) {
	recs := many("p", 230, base)
	insert(t, s, recs)
	for _, q := range []*historyv1.AuditQuery{{Limit: 7}, {Limit: 1}, {Limit: 230}, {Limit: 229}, {Session: "s2", Limit: 9}, {Tool: "fill", Limit: 11}} {
		got := ids(walk(t, s, q))
		equalIDs(t, fmt.Sprintf("walk %v", q), got, reference(recs, q))
	}
	// A full last page has no next cursor.
	p := query(t, s, &historyv1.AuditQuery{Limit: 230})
	if len(p.GetRecords()) != 230 || p.GetNextCursor() != "" {
		t.Errorf("limit 230 of 230: %d records, cursor %q", len(p.GetRecords()), p.GetNextCursor())
	}
}

func testPaginationStable(t *testing.T, s store.Store) {
	present := many("old", 100, base)
	insert(t, s, present)
	for _, session := range []string{"", "s1"} {
		q := &historyv1.AuditQuery{Limit: 10, Session: session}
		want := reference(present, q)
		var got []string
		for page := 0; ; page++ {
			p := query(t, s, q)
			got = append(got, ids(p.GetRecords())...)
			if p.GetNextCursor() == "" {
				break
			}
			q.Cursor = p.GetNextCursor()
			// Newer records arrive between pages.
			fresh := many(fmt.Sprintf("new%s-%d", session, page), 3, base.Add(time.Hour+time.Duration(len(present))*time.Second))
			for _, r := range fresh {
				r.BrowserSession = "s1"
			}
			insert(t, s, fresh)
			present = append(present, fresh...)
		}
		equalIDs(t, "walk while inserting, session "+session, got, want)
	}
}

func testLimits(t *testing.T, s store.Store) {
	insert(t, s, many("l", store.MaxPage+20, base))
	for _, c := range []struct{ limit, want int32 }{{0, store.DefaultPage}, {-3, store.DefaultPage}, {5, 5}, {store.MaxPage + 1, store.MaxPage}, {1 << 30, store.MaxPage}} {
		p := query(t, s, &historyv1.AuditQuery{Limit: c.limit})
		if len(p.GetRecords()) != int(c.want) || p.GetNextCursor() == "" {
			t.Errorf("limit %d: %d records (cursor %q), want %d and a cursor", c.limit, len(p.GetRecords()), p.GetNextCursor(), c.want)
		}
	}
}

func testBadCursor(t *testing.T, s store.Store) {
	insert(t, s, many("c", 10, base))
	for _, c := range []string{"garbage!", "Zm9v", store.ChatCursor(5, "x"), "YTEyMw"} {
		if _, err := s.QueryAudit(ctxT(t), &historyv1.AuditQuery{Cursor: c}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("audit cursor %q: err = %v, want ErrInvalid", c, err)
		}
	}
	if _, _, err := s.ListChatSessions(ctxT(t), 0, store.AuditCursor(5, "x")); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("chat list with an audit cursor: err = %v, want ErrInvalid", err)
	}
}

func testAfterSeq(t *testing.T, s store.Store) {
	// Stored order differs from time order: seq follows storing.
	recs := many("a", 12, base)
	slices.Reverse(recs)
	insert(t, s, recs[:6])
	insert(t, s, recs[6:])
	all := query(t, s, &historyv1.AuditQuery{AfterSeq: 0, Limit: 100}).GetRecords()
	if len(all) != 12 {
		t.Fatalf("%d records", len(all))
	}
	seqOf := map[string]int64{}
	for _, r := range all {
		if r.GetSeq() <= 0 {
			t.Fatalf("record %s has seq %d", r.GetId(), r.GetSeq())
		}
		seqOf[r.GetId()] = r.GetSeq()
	}
	for i := 1; i < len(recs); i++ {
		if seqOf[recs[i].Id] <= seqOf[recs[i-1].Id] {
			t.Fatalf("seq does not follow storing order: %s %d after %s %d", recs[i].Id, seqOf[recs[i].Id], recs[i-1].Id, seqOf[recs[i-1].Id])
		}
	}
	after := seqOf[recs[3].Id]
	p := query(t, s, &historyv1.AuditQuery{AfterSeq: after})
	equalIDs(t, "after seq", ids(p.GetRecords()), ids(recs[4:]))
	if p.GetNextCursor() != "" {
		t.Errorf("after_seq page has a cursor %q", p.GetNextCursor())
	}
	p = query(t, s, &historyv1.AuditQuery{AfterSeq: after, Limit: 3})
	equalIDs(t, "after seq, limit 3", ids(p.GetRecords()), ids(recs[4:7]))
	// Filters apply.
	var want []string
	for _, r := range recs[4:] {
		if r.Tool == "fill" && (r.BrowserSession == "s2" || r.McpSession == "s2") {
			want = append(want, r.Id)
		}
	}
	p = query(t, s, &historyv1.AuditQuery{AfterSeq: after, Tool: "fill", Session: "s2"})
	equalIDs(t, "after seq, filtered", ids(p.GetRecords()), want)
	if p = query(t, s, &historyv1.AuditQuery{AfterSeq: seqOf[recs[11].Id]}); len(p.GetRecords()) != 0 {
		t.Errorf("after the last seq: %d records", len(p.GetRecords()))
	}
}

func testDuplicates(t *testing.T, s store.Store) {
	recs := many("d", 8, base)
	if n := insert(t, s, recs[:5]); n != 5 {
		t.Errorf("first batch: inserted %d, want 5", n)
	}
	// Three redelivered, two new, one new twice in the batch.
	batch := append(slices.Clone(recs[2:8]), recs[7])
	if n := insert(t, s, batch); n != 3 {
		t.Errorf("second batch: inserted %d, want 3", n)
	}
	if got := walk(t, s, &historyv1.AuditQuery{}); len(got) != 8 {
		t.Errorf("%d rows stored, want 8", len(got))
	}
	if n := insert(t, s, nil); n != 0 {
		t.Errorf("empty batch: %d", n)
	}
}

func testFields(t *testing.T, s store.Store) {
	outcomes := []historyv1.Outcome{historyv1.Outcome_OUTCOME_UNSPECIFIED, historyv1.Outcome_OUTCOME_OK, historyv1.Outcome_OUTCOME_ERROR,
		historyv1.Outcome_OUTCOME_DENIED, historyv1.Outcome_OUTCOME_TIMEOUT}
	var recs []*historyv1.AuditRecord
	for i, o := range outcomes {
		recs = append(recs, &historyv1.AuditRecord{
			Id: fmt.Sprintf("f%d", i), TimeUnixNano: base.Add(time.Duration(i)).UnixNano(), Caller: "carol",
			McpSession: "mcp-x", BrowserSession: "br-y", Tool: "navigate", Arguments: `{"url":"https://a.example"}`,
			Result: "ok", DurationMicros: 1234567, Outcome: o, TraceId: "0123456789abcdef0123456789abcdef",
			Source: "agent", Client: "cli 1.0",
		})
	}
	insert(t, s, recs)
	got := query(t, s, &historyv1.AuditQuery{}).GetRecords()
	slices.Reverse(got)
	if len(got) != len(recs) {
		t.Fatalf("%d records", len(got))
	}
	for i, r := range got {
		w := recs[i]
		if r.Id != w.Id || r.TimeUnixNano != w.TimeUnixNano || r.Caller != w.Caller || r.McpSession != w.McpSession ||
			r.BrowserSession != w.BrowserSession || r.Tool != w.Tool || r.Arguments != w.Arguments || r.Result != w.Result ||
			r.DurationMicros != w.DurationMicros || r.Outcome != w.Outcome || r.TraceId != w.TraceId || r.Source != w.Source ||
			r.Client != w.Client || r.ArgumentsChars != int32(len(w.Arguments)) || r.ResultChars != 2 || r.Seq == 0 {
			t.Errorf("stored %v,\ngave %v", r, w)
		}
	}
	for _, r := range got {
		if r.Approval != nil {
			t.Errorf("record %s without an approval comes back with %v", r.Id, r.Approval)
		}
	}
	// An outcome this version does not know is stored as unspecified.
	insert(t, s, []*historyv1.AuditRecord{{Id: "future", TimeUnixNano: 1, Outcome: 42}})
	if got := query(t, s, &historyv1.AuditQuery{UntilUnixNano: 2}).GetRecords(); len(got) != 1 || got[0].Outcome != historyv1.Outcome_OUTCOME_UNSPECIFIED {
		t.Errorf("unknown outcome: %v", got)
	}
}

// testApproval: the decision on a monitored call is stored with its record
// and read back by every kind of query; its texts are cleaned and bounded.
func testApproval(t *testing.T, s store.Store) {
	approved := &historyv1.Approval{State: "approved", Scope: "session", DecidedBy: "console:admin",
		DecidedAtUnixMilli: base.UnixMilli(), WaitedMs: 4200, RequestId: "req1"}
	denied := &historyv1.Approval{State: "denied", DecidedBy: "elicitation:claude \xff\x00" + strings.Repeat("x", 300),
		DecidedAtUnixMilli: base.UnixMilli() + 1, WaitedMs: 10, RequestId: "req2"}
	recs := []*historyv1.AuditRecord{
		{Id: "a1", TimeUnixNano: base.UnixNano(), McpSession: "m", Tool: "eval", Result: "ran the script", Approval: approved},
		{Id: "a2", TimeUnixNano: base.Add(time.Second).UnixNano(), McpSession: "m", Tool: "eval", Result: "eval was denied",
			Outcome: historyv1.Outcome_OUTCOME_DENIED, Approval: denied},
		{Id: "a3", TimeUnixNano: base.Add(2 * time.Second).UnixNano(), McpSession: "m", Tool: "snapshot", Result: "no approval needed"},
	}
	insert(t, s, recs)
	wantDenied := proto.Clone(denied).(*historyv1.Approval)
	wantDenied.DecidedBy = string([]rune("elicitation:claude \uFFFD\uFFFD" + strings.Repeat("x", 300))[:200])
	want := map[string]*historyv1.Approval{"a1": approved, "a2": wantDenied, "a3": nil}
	for _, q := range []*historyv1.AuditQuery{{}, {Session: "m"}, {Text: "eval"}, {Text: "approval"}, {Follow: true}, {Tool: "eval"}} {
		got := walk(t, s, q)
		if len(got) == 0 {
			t.Errorf("query %v found nothing", q)
		}
		for _, r := range got {
			if !proto.Equal(r.GetApproval(), want[r.GetId()]) {
				t.Errorf("query %v: record %s has approval %v, want %v", q, r.GetId(), r.GetApproval(), want[r.GetId()])
			}
		}
	}
}

func testTruncation(t *testing.T, s store.Store) {
	args := strings.Repeat("é日", 2600)   // 5200 characters, 13000 bytes
	result := strings.Repeat("😀a", 1100) // 2200 characters
	insert(t, s, []*historyv1.AuditRecord{
		{Id: "long", TimeUnixNano: 2, Arguments: args, Result: result},
		{Id: "given", TimeUnixNano: 1, Arguments: "short", Result: "x", ArgumentsChars: 99999, ResultChars: 7},
	})
	got := query(t, s, &historyv1.AuditQuery{}).GetRecords()
	if len(got) != 2 {
		t.Fatalf("%d records", len(got))
	}
	r := got[0]
	if r.Arguments != string([]rune(args)[:store.MaxArgumentChars]) || r.ArgumentsChars != 5200 {
		t.Errorf("arguments: %d characters stored (valid %v), arguments_chars %d; want %d and 5200",
			utf8.RuneCountInString(r.Arguments), utf8.ValidString(r.Arguments), r.ArgumentsChars, store.MaxArgumentChars)
	}
	if r.Result != string([]rune(result)[:store.MaxResultChars]) || r.ResultChars != 2200 {
		t.Errorf("result: %d characters stored, result_chars %d", utf8.RuneCountInString(r.Result), r.ResultChars)
	}
	// Lengths given by the publisher (which truncated already) are kept.
	if g := got[1]; g.ArgumentsChars != 99999 || g.ResultChars != 7 || g.Arguments != "short" {
		t.Errorf("given lengths: %v", g)
	}
	// The stored prefix is searchable.
	if n := len(query(t, s, &historyv1.AuditQuery{Text: "😀a😀"}).GetRecords()); n != 1 {
		t.Errorf("text search in the truncated result: %d records", n)
	}
}

func testInvalidText(t *testing.T, s store.Store) {
	bad := "a\xffb\x00c\xe2\x82"
	insert(t, s, []*historyv1.AuditRecord{{
		Id: "inv\xfe", TimeUnixNano: 1, Caller: "c\x00", McpSession: "m\xff", BrowserSession: "b\x00", Tool: "t\xc3",
		Arguments: bad, Result: bad + "tail", TraceId: "\x00", Source: "s\xff", Client: "\xff",
	}})
	got := query(t, s, &historyv1.AuditQuery{}).GetRecords()
	if len(got) != 1 {
		t.Fatalf("%d records", len(got))
	}
	r := got[0]
	for _, f := range []string{r.Id, r.Caller, r.McpSession, r.BrowserSession, r.Tool, r.Arguments, r.Result, r.TraceId, r.Source, r.Client} {
		if !utf8.ValidString(f) || strings.ContainsRune(f, 0) {
			t.Errorf("stored field %q is not clean UTF-8", f)
		}
	}
	if r.Arguments != store.Clean(bad) || r.ArgumentsChars != int32(utf8.RuneCountInString(store.Clean(bad))) {
		t.Errorf("arguments %q (%d characters), want %q", r.Arguments, r.ArgumentsChars, store.Clean(bad))
	}
	// Filters given the same bytes find it.
	if n := len(query(t, s, &historyv1.AuditQuery{Session: "m\xff", Tool: "t\xc3", Caller: "c\x00"}).GetRecords()); n != 1 {
		t.Errorf("filters with the raw bytes: %d records", n)
	}
	if n := len(query(t, s, &historyv1.AuditQuery{Text: "b\x00c"}).GetRecords()); n != 1 {
		t.Errorf("text with a NUL: %d records", n)
	}
}

func testEmptyID(t *testing.T, s store.Store) {
	_, err := s.InsertAudit(ctxT(t), []*historyv1.AuditRecord{{Id: "ok", TimeUnixNano: 1}, {TimeUnixNano: 2}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("record without id: err = %v, want ErrInvalid", err)
	}
	if n := len(query(t, s, &historyv1.AuditQuery{}).GetRecords()); n != 0 {
		t.Errorf("a refused batch stored %d records", n)
	}
}

func testDeleteBefore(t *testing.T, s store.Store) {
	var recs []*historyv1.AuditRecord
	for i := range 30 {
		recs = append(recs, &historyv1.AuditRecord{
			Id: fmt.Sprintf("r%02d", i), TimeUnixNano: base.Add(time.Duration(i) * time.Minute).UnixNano(),
			BrowserSession: "sess", Arguments: fmt.Sprintf(`{"marker":"needle-%s"}`, map[bool]string{true: "old", false: "new"}[i < 20]),
		})
	}
	// Stored newest first, so deletion by time is not deletion by seq.
	slices.Reverse(recs)
	insert(t, s, recs)
	ctx := ctxT(t)
	cut := base.Add(20 * time.Minute)
	if _, err := s.DeleteAuditBefore(ctx, cut, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("limit 0: err = %v, want ErrInvalid", err)
	}
	var counts []int64
	for {
		n, err := s.DeleteAuditBefore(ctx, cut, 7)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, n)
		if n == 0 {
			break
		}
	}
	if !slices.Equal(counts, []int64{7, 7, 6, 0}) {
		t.Errorf("deleted per call %v, want [7 7 6 0]", counts)
	}
	var want []string
	for i := 29; i >= 20; i-- {
		want = append(want, fmt.Sprintf("r%02d", i))
	}
	equalIDs(t, "after delete", ids(walk(t, s, &historyv1.AuditQuery{Limit: 3})), want)
	if n := len(query(t, s, &historyv1.AuditQuery{Text: "needle-old"}).GetRecords()); n != 0 {
		t.Errorf("text search finds %d deleted records", n)
	}
	equalIDs(t, "text after delete", ids(query(t, s, &historyv1.AuditQuery{Text: "NEEDLE-new", Session: "sess"}).GetRecords()), want)
}

func testConcurrentInsert(t *testing.T, s store.Store) {
	const writers, batches, size = 6, 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	counts := make([]int, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				recs := many(fmt.Sprintf("w%d-%d", w, b), size, base.Add(time.Duration(w*batches+b)*time.Second))
				// Every writer also redelivers one record of writer 0.
				recs = append(recs, many("w0-0", size, base)[0])
				n, err := s.InsertAudit(t.Context(), recs)
				if err != nil {
					errs <- err
					return
				}
				counts[w] += n
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if total != writers*batches*size {
		t.Errorf("inserted %d, want %d", total, writers*batches*size)
	}
	// Seqs are distinct, and the after_seq walk from the smallest sees
	// every other record once, in seq order.
	all := walk(t, s, &historyv1.AuditQuery{Limit: store.MaxPage})
	if len(all) != total {
		t.Fatalf("%d records stored, want %d", len(all), total)
	}
	seqs := make([]int64, len(all))
	for i, r := range all {
		seqs[i] = r.GetSeq()
	}
	slices.Sort(seqs)
	if len(slices.Compact(slices.Clone(seqs))) != len(seqs) || seqs[0] <= 0 {
		t.Fatal("seqs are not distinct and positive")
	}
	var followed []int64
	for after := seqs[0]; ; {
		p := query(t, s, &historyv1.AuditQuery{AfterSeq: after, Limit: 97})
		if len(p.GetRecords()) == 0 {
			break
		}
		for _, r := range p.GetRecords() {
			followed = append(followed, r.GetSeq())
		}
		after = followed[len(followed)-1]
	}
	if !slices.Equal(followed, seqs[1:]) {
		t.Errorf("after_seq walk: %d seqs, want %d in order", len(followed), len(seqs)-1)
	}
}
