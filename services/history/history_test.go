package history

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// backends runs fn once per storage backend, each on a fresh database.
func backends(t *testing.T, fn func(t *testing.T, cfg Config)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, Config{DataDir: t.TempDir(), Retention: DefaultRetention})
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, Config{DSN: pgtest.Start(t), Retention: DefaultRetention})
	})
}

// start runs a history service on c until the test ends.
func start(t *testing.T, cfg Config, c *bus.Conn) *Service {
	t.Helper()
	s, err := New(t.Context(), cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	kittest.RunService(t, s)
	select {
	case <-s.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("history did not attach to the audit stream")
	}
	return s
}

func publisher(t *testing.T, c *bus.Conn) *audit.Publisher {
	t.Helper()
	p, err := audit.NewPublisher(c.NATS(), audit.PublisherConfig{Source: "test", Prefix: c.Prefix(), Redactor: new(redact.Set)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// all returns every stored record matching q (newest first).
func all(t *testing.T, c *bus.Conn, q *historyv1.AuditQuery) []*historyv1.AuditRecord {
	t.Helper()
	var out []*historyv1.AuditRecord
	q.Limit = 1000
	for {
		page := &historyv1.AuditPage{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Request(ctx, c.Subject("history", "audit", "query"), q, page)
		cancel()
		if err != nil {
			t.Fatalf("audit query: %v", err)
		}
		out = append(out, page.GetRecords()...)
		if page.GetNextCursor() == "" {
			return out
		}
		q.Cursor = page.GetNextCursor()
	}
}

// waitFor polls until q matches want records (or fails after 30 s, or at
// once when more match).
func waitFor(t *testing.T, c *bus.Conn, q *historyv1.AuditQuery, want int) []*historyv1.AuditRecord {
	t.Helper()
	return kittest.EventuallyValue(t, 30*time.Second, func() ([]*historyv1.AuditRecord, error) {
		got := all(t, c, proto.Clone(q).(*historyv1.AuditQuery))
		if len(got) > want {
			t.Fatalf("audit has %d records matching %v, want %d", len(got), q, want)
		}
		return got, kittest.Check(len(got) == want, "audit has %d records matching %v, want %d", len(got), q, want)
	})
}

func TestRecordsStoredOnceAfterBacklog(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, cfg Config) {
		srv := natstest.Server(t)
		c := natstest.Bus(t, srv)
		p := publisher(t, c)
		// History is not running: records wait in the stream.
		const n = 200
		nsec := "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
		for i := range n {
			p.Publish(audit.Record{
				Start: time.Now(), Duration: time.Duration(i) * time.Millisecond, Caller: "ci-agent",
				Tool: "fill", Arguments: fmt.Appendf(nil, `{"ref":"e%d","value":"%s"}`, i, nsec),
				Result: "Filled", Outcome: historyv1.Outcome_OUTCOME_OK, BrowserSession: "s1",
			})
		}
		js, _ := jetstream.New(c.NATS())
		waitBacklog(t, js, n)

		start(t, cfg, c)
		got := waitFor(t, c, &historyv1.AuditQuery{Tool: "fill"}, n)
		ids := map[string]bool{}
		for _, r := range got {
			if ids[r.GetId()] {
				t.Fatalf("record %s twice", r.GetId())
			}
			ids[r.GetId()] = true
			if strings.Contains(r.GetArguments(), "nsec1") {
				t.Fatalf("an nsec reached the trail: %s", r.GetArguments())
			}
			if r.GetCaller() != "ci-agent" || r.GetBrowserSession() != "s1" || r.GetSource() != "test" {
				t.Fatalf("record lost fields: %v", r)
			}
		}
		waitBacklog(t, js, 0)
	})
}

func waitBacklog(t *testing.T, js jetstream.JetStream, want uint64) {
	t.Helper()
	waitBacklogN(t, js, want, 30*time.Second)
}

// rawRecord publishes data on the record subject with its own message id,
// bypassing the stream's duplicate window as a redelivery would.
func rawRecord(t *testing.T, c *bus.Conn, data []byte) {
	t.Helper()
	js, _ := jetstream.New(c.NATS())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, audit.RecordSubject(c.Prefix(), "test"), data); err != nil {
		t.Fatal(err)
	}
}

func validRecord(tool string) *historyv1.AuditRecord {
	return &historyv1.AuditRecord{
		Id: uuid.Must(uuid.NewV7()).String(), TimeUnixNano: time.Now().UnixNano(), Tool: tool,
		Arguments: "{}", Outcome: historyv1.Outcome_OUTCOME_OK, Source: "test",
	}
}

func TestMalformedRecordsAreParked(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	start(t, Config{DataDir: t.TempDir()}, c)

	rawRecord(t, c, []byte("\xff\xff not protobuf"))
	bad := validRecord("")
	bad.Id = "not-a-uuid"
	b, _ := proto.Marshal(bad)
	rawRecord(t, c, b)
	good := validRecord("get_title")
	b, _ = proto.Marshal(good)
	rawRecord(t, c, b)
	// The same record again, as a redelivery after a lost ack would be.
	rawRecord(t, c, b)

	waitFor(t, c, &historyv1.AuditQuery{Tool: "get_title"}, 1)
	js, _ := jetstream.New(c.NATS())
	waitBacklog(t, js, 0)

	ctx := context.Background()
	ds, err := js.Stream(ctx, audit.DeadStream)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := ds.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("parked record %d: %v", seq, err)
		}
		reasons = append(reasons, m.Header.Get(audit.HeaderReason))
	}
	if !strings.HasPrefix(reasons[0], "undecodable: not an AuditRecord") {
		t.Errorf("reason of the garbage record = %q", reasons[0])
	}
	if !strings.Contains(reasons[1], `id "not-a-uuid" is not a UUID`) || !strings.Contains(reasons[1], "tool is empty") {
		t.Errorf("reason of the invalid record = %q", reasons[1])
	}
}

func TestOversizedArgumentsAreTruncated(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	start(t, Config{DataDir: t.TempDir()}, c)
	// A publisher that did not truncate: history still stores a prefix.
	rec := validRecord("eval")
	rec.Arguments = `{"script":"` + strings.Repeat("é", 100000) + `"}`
	rec.Result = strings.Repeat("r", 50000)
	b, _ := proto.Marshal(rec)
	rawRecord(t, c, b)
	got := waitFor(t, c, &historyv1.AuditQuery{Tool: "eval"}, 1)[0]
	if n := len([]rune(got.GetArguments())); n != audit.MaxArgumentChars {
		t.Errorf("stored %d characters of arguments, want %d", n, audit.MaxArgumentChars)
	}
	if got.GetArgumentsChars() != 100013 || got.GetResultChars() != 50000 {
		t.Errorf("original lengths = %d, %d", got.GetArgumentsChars(), got.GetResultChars())
	}
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	start(t, Config{DataDir: t.TempDir()}, c)
	ctx := context.Background()
	for _, tc := range []struct {
		q    *historyv1.AuditQuery
		want string
	}{
		{&historyv1.AuditQuery{Text: "ab"}, "at least 3"},
		{&historyv1.AuditQuery{Limit: -1}, "limit -1"},
		{&historyv1.AuditQuery{Cursor: "garbage!"}, "cursor"},
		{&historyv1.AuditQuery{SinceUnixNano: 10, UntilUnixNano: 5}, "until must be after since"},
	} {
		err := c.Request(ctx, c.Subject("history", "audit", "query"), tc.q, &historyv1.AuditPage{})
		if bus.CodeOf(err) != commonv1.ErrorCode_INVALID_ARGUMENT || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("query %v: err = %v, want INVALID_ARGUMENT with %q", tc.q, err, tc.want)
		}
	}
}

func TestChatOverBus(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, cfg Config) {
		srv := natstest.Server(t)
		c := natstest.Bus(t, srv)
		start(t, cfg, c)
		ctx := context.Background()
		req := func(verb string, in, out proto.Message) error {
			return c.Request(ctx, c.Subject("history", "chat", verb), in, out)
		}
		cs := &historyv1.ChatSession{}
		if err := req("create", &historyv1.CreateChatSessionRequest{Title: "first"}, cs); err != nil {
			t.Fatal(err)
		}
		if _, err := uuid.Parse(cs.GetId()); err != nil {
			t.Fatalf("session id %q is not a UUID", cs.GetId())
		}
		app := &historyv1.AppendChatMessagesResponse{}
		err := req("append", &historyv1.AppendChatMessagesRequest{SessionId: cs.GetId(), Messages: []*historyv1.ChatMessage{
			{Role: "user", Content: "open example.com"},
			{Role: "assistant", ToolCallsJson: `[{"id":"c1","type":"function","function":{"name":"open","arguments":"{}"}}]`},
			{Role: "tool", ToolCallId: "c1", Content: "Opened"},
		}}, app)
		if err != nil {
			t.Fatal(err)
		}
		if len(app.GetMessages()) != 3 || app.GetMessages()[0].GetId() >= app.GetMessages()[2].GetId() {
			t.Fatalf("append returned %v", app.GetMessages())
		}
		got := &historyv1.GetChatSessionResponse{}
		if err := req("get", &historyv1.GetChatSessionRequest{Id: cs.GetId(), LastMessages: 2}, got); err != nil {
			t.Fatal(err)
		}
		if len(got.GetMessages()) != 2 || got.GetMessages()[1].GetToolCallId() != "c1" {
			t.Fatalf("get returned %v", got.GetMessages())
		}

		err = req("append", &historyv1.AppendChatMessagesRequest{SessionId: cs.GetId(), Messages: []*historyv1.ChatMessage{{Role: "robot"}}}, app)
		if bus.CodeOf(err) != commonv1.ErrorCode_INVALID_ARGUMENT || !strings.Contains(err.Error(), "robot") {
			t.Errorf("bad role: %v", err)
		}
		err = req("append", &historyv1.AppendChatMessagesRequest{SessionId: cs.GetId(), Messages: []*historyv1.ChatMessage{{Role: "user", Content: strings.Repeat("x", MaxChatContent+1)}}}, app)
		if bus.CodeOf(err) != commonv1.ErrorCode_TOO_LARGE {
			t.Errorf("oversized message: %v", err)
		}
		err = req("append", &historyv1.AppendChatMessagesRequest{SessionId: "missing", Messages: []*historyv1.ChatMessage{{Role: "user"}}}, app)
		if bus.CodeOf(err) != commonv1.ErrorCode_NOT_FOUND {
			t.Errorf("append to a missing session: %v", err)
		}
		list := &historyv1.ListChatSessionsResponse{}
		if err := req("list", &historyv1.ListChatSessionsRequest{}, list); err != nil || len(list.GetSessions()) != 1 {
			t.Fatalf("list = %v, %v", list.GetSessions(), err)
		}
		if err := req("delete", &historyv1.DeleteChatSessionRequest{Id: cs.GetId()}, &historyv1.DeleteChatSessionResponse{}); err != nil {
			t.Fatal(err)
		}
		err = req("get", &historyv1.GetChatSessionRequest{Id: cs.GetId()}, got)
		if bus.CodeOf(err) != commonv1.ErrorCode_NOT_FOUND {
			t.Errorf("get after delete: %v", err)
		}
	})
}

func TestPruneDeletesOnlyOldRecords(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	s := start(t, Config{DataDir: t.TempDir()}, c)
	old := time.Now().Add(-100 * 24 * time.Hour)
	for i := range 2500 {
		r := validRecord("old")
		r.TimeUnixNano = old.Add(time.Duration(i) * time.Second).UnixNano()
		b, _ := proto.Marshal(r)
		rawRecord(t, c, b)
	}
	b, _ := proto.Marshal(validRecord("new"))
	rawRecord(t, c, b)
	waitFor(t, c, &historyv1.AuditQuery{}, 2501)
	n, err := s.Prune(context.Background(), time.Now().Add(-90*24*time.Hour))
	if err != nil || n != 2500 {
		t.Fatalf("Prune = %d, %v; want 2500", n, err)
	}
	if got := all(t, c, &historyv1.AuditQuery{}); len(got) != 1 || got[0].GetTool() != "new" {
		t.Fatalf("left %d records", len(got))
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg        Config
		kind, want string
		err        string
	}{
		{cfg: Config{DataDir: "/d"}, kind: "sqlite", want: "/d/history.db"},
		{cfg: Config{DSN: "postgres://u@h/db"}, kind: "postgres", want: "postgres://u@h/db"},
		{cfg: Config{DSN: "sqlite:/x/h.db"}, kind: "sqlite", want: "/x/h.db"},
		{cfg: Config{DSN: "mysql://h/db"}, err: `unknown database "mysql"`},
		{cfg: Config{DSN: "sqlite:"}, err: "names no file"},
		{cfg: Config{Retention: time.Minute}, err: "at least 1h"},
	} {
		kind, target, err := tc.cfg.backend()
		if err == nil {
			err = tc.cfg.Validate()
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.err)
			}
			continue
		}
		if err != nil || kind != tc.kind || target != filepath.FromSlash(tc.want) {
			t.Errorf("%+v: %s %s %v", tc.cfg, kind, target, err)
		}
	}
}

// TestMain shares one PostgreSQL server among the package's tests.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
