package sovereign

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

const auditUsage = `sovereign audit — read the audit trail of tool calls (operators only)

Usage:
  sovereign audit [filters] [--json] [--follow]   records, newest first
  sovereign audit --stats                         the audit stream's backlog

Filters: --since 1h (or an RFC 3339 time), --until, --tool, --session,
--caller, --errors, --text (at least 3 characters), --limit, --cursor.
The trail is read from the history service over NATS (--nats-url);
--stats reads JetStream directly and works while history is down.
`

// auditOpts are the flags of `sovereign audit`.
type auditOpts struct {
	natsURL      string
	since, until string
	query        historyv1.AuditQuery
	json, follow bool
	stats        bool
	poll         time.Duration
	timeout      time.Duration
}

// auditCmd runs `sovereign audit`, writing to out.
func auditCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sovereign audit", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), auditUsage, "\nFlags:\n"); fs.PrintDefaults() }
	var o auditOpts
	var limit int
	fs.StringVar(&o.natsURL, "nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	fs.StringVar(&o.since, "since", "", "only calls at or after this: a duration back from now (90m, 2d) or an RFC 3339 time")
	fs.StringVar(&o.until, "until", "", "only calls before this (same forms as --since)")
	fs.StringVar(&o.query.Tool, "tool", "", "only this tool")
	fs.StringVar(&o.query.Session, "session", "", "only this MCP session or browser session id")
	fs.StringVar(&o.query.Caller, "caller", "", "only this caller (as shown in the CALLER column)")
	fs.BoolVar(&o.query.ErrorsOnly, "errors", false, "only calls that did not succeed")
	fs.StringVar(&o.query.Text, "text", "", "only calls whose arguments or result contain this text (case-insensitive)")
	fs.IntVar(&limit, "limit", 50, "records per page (at most 1000)")
	fs.StringVar(&o.query.Cursor, "cursor", "", "continue after a previous page (printed at its end)")
	fs.BoolVar(&o.json, "json", false, "print one JSON record per line")
	fs.BoolVar(&o.follow, "follow", false, "print the latest records, then new ones as they are stored, until interrupted")
	fs.BoolVar(&o.stats, "stats", false, "print the audit stream's backlog and the consumer's state")
	fs.DurationVar(&o.poll, "poll", 500*time.Millisecond, "how often --follow asks for new records")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the history service")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return app.UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return app.UsageError{Err: fmt.Errorf("sovereign audit takes no arguments (got %q); filters are flags, see -h", fs.Args())}
	}
	if limit < 1 || limit > 1000 {
		return app.UsageError{Err: fmt.Errorf("--limit %d: must be 1 to 1000", limit)}
	}
	o.query.Limit = int32(limit)
	now := time.Now()
	for _, f := range []struct {
		name, v string
		dst     *int64
	}{{"since", o.since, &o.query.SinceUnixNano}, {"until", o.until, &o.query.UntilUnixNano}} {
		if f.v == "" {
			continue
		}
		t, err := parseWhen(f.v, now)
		if err != nil {
			return app.UsageError{Err: fmt.Errorf("--%s %q: %w", f.name, f.v, err)}
		}
		*f.dst = t.UnixNano()
	}
	if o.follow && o.query.Cursor != "" {
		return app.UsageError{Err: errors.New("--follow and --cursor do not go together")}
	}

	nc, err := nats.Connect(o.natsURL, nats.Name("sovereign-audit"), nats.Timeout(o.timeout))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w (is sovereign up or NATS running? pass --nats-url)", o.natsURL, err)
	}
	defer nc.Close()
	if o.stats {
		return printStats(ctx, nc, out, o.timeout)
	}
	c, err := bus.New(nc, "")
	if err != nil {
		return err
	}
	defer c.Close()
	p := &printer{out: out, json: o.json}
	if !o.follow {
		page, err := queryAudit(ctx, c, &o.query, o.timeout)
		if err != nil {
			return err
		}
		p.records(page.GetRecords(), false)
		p.flush()
		if page.GetNextCursor() != "" && !o.json {
			fmt.Fprintf(out, "\nmore: --cursor %s\n", page.GetNextCursor())
		}
		return nil
	}
	return follow(ctx, c, &o, p)
}

// parseWhen reads "90m"/"2d" (back from now) or an RFC 3339 time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if d, err := config.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", v, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("not a duration (90m, 2d) or a time (2026-11-30T12:00:00Z, 2026-11-30)")
}

func queryAudit(ctx context.Context, c *bus.Conn, q *historyv1.AuditQuery, timeout time.Duration) (*historyv1.AuditPage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	page, err := historybus.AuditQuery.Call(ctx, c, q)
	if err != nil {
		if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE {
			return nil, errors.New("no history service answers on NATS (is it running? `sovereign up` runs one; `sovereign history` runs one alone)")
		}
		return nil, fmt.Errorf("audit query: %w", err)
	}
	return page, nil
}

// follow prints the latest records oldest first, then polls for records
// stored since. It asks again for a window of seqs it has already seen and
// skips the ids it printed: a PostgreSQL replica can commit a lower seq
// after a higher one.
func follow(ctx context.Context, c *bus.Conn, o *auditOpts, p *printer) error {
	const overlap = 1000
	page, err := queryAudit(ctx, c, &o.query, o.timeout)
	if err != nil {
		return err
	}
	seen := newSeenSet(4 * overlap)
	var last int64
	recs := page.GetRecords()
	for i := len(recs) - 1; i >= 0; i-- {
		seen.add(recs[i].GetId())
		last = max(last, recs[i].GetSeq())
	}
	p.records(recs, true)
	p.flush()
	q := &historyv1.AuditQuery{
		SinceUnixNano: o.query.SinceUnixNano, UntilUnixNano: o.query.UntilUnixNano,
		Tool: o.query.Tool, Session: o.query.Session, Caller: o.query.Caller,
		ErrorsOnly: o.query.ErrorsOnly, Text: o.query.Text, Limit: 1000, Follow: true,
	}
	t := time.NewTicker(o.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		q.AfterSeq = max(last-overlap, 0)
		page, err := queryAudit(ctx, c, q, o.timeout)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(os.Stderr, "sovereign audit:", err, "(retrying)")
			continue
		}
		var fresh []*historyv1.AuditRecord
		for _, r := range page.GetRecords() {
			last = max(last, r.GetSeq())
			if seen.add(r.GetId()) {
				fresh = append(fresh, r)
			}
		}
		p.records(fresh, false)
		p.flush()
	}
}

// seenSet remembers the last n ids.
type seenSet struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func newSeenSet(n int) *seenSet {
	return &seenSet{ids: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add reports whether id is new.
func (s *seenSet) add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.ids[id] = struct{}{}
	return true
}

// printer writes records as a table or as JSON lines.
type printer struct {
	out    io.Writer
	json   bool
	tw     *tabwriter.Writer
	header bool
}

// records prints recs in their order, or reversed.
func (p *printer) records(recs []*historyv1.AuditRecord, reverse bool) {
	order := recs
	if reverse {
		order = make([]*historyv1.AuditRecord, len(recs))
		for i, r := range recs {
			order[len(recs)-1-i] = r
		}
	}
	if p.json {
		m := protojson.MarshalOptions{UseProtoNames: true}
		for _, r := range order {
			b, _ := m.Marshal(r)
			fmt.Fprintln(p.out, string(b))
		}
		return
	}
	if p.tw == nil {
		p.tw = tabwriter.NewWriter(p.out, 0, 0, 2, ' ', 0)
	}
	if !p.header {
		fmt.Fprintln(p.tw, "TIME\tTOOL\tOUTCOME\tDURATION\tCALLER\tSESSION\tARGUMENTS\tRESULT")
		p.header = true
	}
	for _, r := range order {
		session := r.GetBrowserSession()
		if session == "" {
			session = r.GetMcpSession()
		}
		fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			time.Unix(0, r.GetTimeUnixNano()).Local().Format("2006-01-02 15:04:05.000"),
			r.GetTool(), outcomeName(r.GetOutcome()),
			(time.Duration(r.GetDurationMicros()) * time.Microsecond).Round(100*time.Microsecond).String(),
			dash(r.GetCaller()), dash(short(session, 16)), oneLine(r.GetArguments(), 60), resultCell(r))
	}
}

// resultCell is the RESULT column: who decided a monitored call ("approved
// by console:admin") before its result.
func resultCell(r *historyv1.AuditRecord) string {
	a := r.GetApproval()
	if a == nil {
		return oneLine(r.GetResult(), 60)
	}
	var who string
	switch a.GetState() {
	case "approved":
		who = "approved by " + dash(a.GetDecidedBy())
		if a.GetScope() == "session" {
			who += " for the session"
		}
	case "timeout":
		who = "timed out waiting for approval"
	default:
		who = a.GetState() + " by " + dash(a.GetDecidedBy())
	}
	if strings.TrimSpace(r.GetResult()) == "" {
		return who
	}
	return who + "; " + oneLine(r.GetResult(), 60)
}

func (p *printer) flush() {
	if p.tw != nil {
		_ = p.tw.Flush()
	}
}

func outcomeName(o historyv1.Outcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "OUTCOME_"))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// oneLine flattens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return dash(s)
}

// printStats prints the audit stream's state from JetStream.
func printStats(ctx context.Context, nc *nats.Conn, out io.Writer, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	b, err := history.Backlog(ctx, js)
	if err != nil {
		return fmt.Errorf("audit stream: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "stream\t%s\n", audit.Stream)
	fmt.Fprintf(tw, "backlog\t%d records (%d bytes of at most %d)\n", b.Pending, b.Bytes, b.MaxBytes)
	fmt.Fprintf(tw, "kept for\t%s before NATS drops an unconsumed record\n", b.MaxAge)
	if b.Consumer {
		last := "never"
		if !b.LastActive.IsZero() {
			last = b.LastActive.Local().Format(time.RFC3339) + " (" + time.Since(b.LastActive).Round(time.Second).String() + " ago)"
		}
		fmt.Fprintf(tw, "consumer\t%s, last delivery %s, %d redelivered\n", audit.Consumer, last, b.Redelivered)
	} else {
		fmt.Fprintf(tw, "consumer\tnone: no history service has attached yet\n")
	}
	fmt.Fprintf(tw, "parked\t%d malformed records in %s\n", b.Parked, audit.DeadStream)
	return tw.Flush()
}

// historyCopy runs `sovereign history copy`.
func historyCopy(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sovereign history copy", flag.ContinueOnError)
	from := fs.String("from", "", "source database: sqlite:/path/history.db (or a path) or postgres://…")
	to := fs.String("to", "", "target database, same forms")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return app.UsageError{Err: err}
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		return app.UsageError{Err: errors.New("usage: sovereign history copy --from <dsn> --to <dsn> (stop history first, or run it again afterwards: copying skips what is already there)")}
	}
	last := time.Now()
	st, err := history.Copy(ctx, *from, *to, func(st history.CopyStats) {
		if time.Since(last) > time.Second {
			last = time.Now()
			fmt.Fprintf(out, "… %d audit records, %d chat sessions\n", st.Audit, st.ChatSessions)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "copied %d audit records (%d new) and %d chat sessions (%d new, %d messages)\n",
		st.Audit, st.AuditNew, st.ChatSessions, st.ChatNew, st.ChatMessages)
	return nil
}
