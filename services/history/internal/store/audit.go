package store

import (
	"encoding/json"
	"fmt"
	"strings"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// Outcome names as stored in the outcome column.
var outcomeNames = map[historyv1.Outcome]string{
	historyv1.Outcome_OUTCOME_UNSPECIFIED: "unspecified",
	historyv1.Outcome_OUTCOME_OK:          "ok",
	historyv1.Outcome_OUTCOME_ERROR:       "error",
	historyv1.Outcome_OUTCOME_DENIED:      "denied",
	historyv1.Outcome_OUTCOME_TIMEOUT:     "timeout",
}

// OutcomeName is the stored name of o ("unspecified" for unknown values).
func OutcomeName(o historyv1.Outcome) string {
	if n, ok := outcomeNames[o]; ok {
		return n
	}
	return "unspecified"
}

// ParseOutcome maps a stored outcome name back.
func ParseOutcome(name string) historyv1.Outcome {
	for o, n := range outcomeNames {
		if n == name {
			return o
		}
	}
	return historyv1.Outcome_OUTCOME_UNSPECIFIED
}

// AuditRow is a record as stored: text cleaned (see Clean), arguments and
// result truncated, lengths filled in, outcome named.
type AuditRow struct {
	ID             string
	TimeUnixNano   int64
	Caller         string
	MCPSession     string
	BrowserSession string
	Tool           string
	Arguments      string
	Result         string
	DurationMicros int64
	Outcome        string
	TraceID        string
	Source         string
	Client         string
	ArgumentsChars int32
	ResultChars    int32
	// Approval is the approval as JSON (ApprovalJSON), nil without one.
	Approval *string
}

// NewAuditRow prepares r for storing; an empty id is ErrInvalid. r is not
// modified.
func NewAuditRow(r *historyv1.AuditRecord) (AuditRow, error) {
	if r.GetId() == "" {
		return AuditRow{}, fmt.Errorf("%w: audit record without id", ErrInvalid)
	}
	args, argsChars := Truncate(r.GetArguments(), MaxArgumentChars)
	res, resChars := Truncate(r.GetResult(), MaxResultChars)
	row := AuditRow{
		ID:             Clean(r.GetId()),
		TimeUnixNano:   r.GetTimeUnixNano(),
		Caller:         Clean(r.GetCaller()),
		MCPSession:     Clean(r.GetMcpSession()),
		BrowserSession: Clean(r.GetBrowserSession()),
		Tool:           Clean(r.GetTool()),
		Arguments:      args,
		Result:         res,
		DurationMicros: r.GetDurationMicros(),
		Outcome:        OutcomeName(r.GetOutcome()),
		TraceID:        Clean(r.GetTraceId()),
		Source:         Clean(r.GetSource()),
		Client:         Clean(r.GetClient()),
		ArgumentsChars: r.GetArgumentsChars(),
		ResultChars:    r.GetResultChars(),
		Approval:       ApprovalJSON(r.GetApproval()),
	}
	if row.ArgumentsChars == 0 {
		row.ArgumentsChars = int32(min(argsChars, 1<<31-1))
	}
	if row.ResultChars == 0 {
		row.ResultChars = int32(min(resChars, 1<<31-1))
	}
	return row, nil
}

// AuditColumns are the columns of the audit table that QueryAudit reads, in
// the order ScanAudit expects.
const AuditColumns = "seq, id, time_unix_nano, caller, mcp_session, browser_session, tool, arguments, result, " +
	"duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars, approval"

// AuditColumnsBeforeApproval are AuditColumns for a schema older than
// ApprovalSchema, which has no approval column.
const AuditColumnsBeforeApproval = "seq, id, time_unix_nano, caller, mcp_session, browser_session, tool, arguments, result, " +
	"duration_micros, outcome, trace_id, source, client, arguments_chars, result_chars, NULL AS approval"

// ScanAudit reads one row of AuditColumns with scan (sql.Rows.Scan or
// pgx.Rows.Scan).
func ScanAudit(scan func(dest ...any) error) (*historyv1.AuditRecord, error) {
	r := &historyv1.AuditRecord{}
	var outcome string
	var approval *string
	if err := scan(&r.Seq, &r.Id, &r.TimeUnixNano, &r.Caller, &r.McpSession, &r.BrowserSession, &r.Tool,
		&r.Arguments, &r.Result, &r.DurationMicros, &outcome, &r.TraceId, &r.Source, &r.Client,
		&r.ArgumentsChars, &r.ResultChars, &approval); err != nil {
		return nil, err
	}
	r.Outcome = ParseOutcome(outcome)
	r.Approval = ParseApproval(approval)
	return r, nil
}

// approvalRow is the stored JSON of an approval.
type approvalRow struct {
	State     string `json:"state"`
	Scope     string `json:"scope,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
	DecidedAt int64  `json:"decided_at_unix_milli,omitempty"`
	WaitedMS  int64  `json:"waited_ms,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// maxApprovalChars bounds each text of a stored approval.
const maxApprovalChars = 200

// ApprovalJSON is how the approval column stores a: a JSON object with the
// proto field names, each text cleaned and cut to 200 characters; nil (SQL
// NULL) without an approval.
func ApprovalJSON(a *historyv1.Approval) *string {
	if a == nil {
		return nil
	}
	text := func(s string) string {
		t, _ := Truncate(s, maxApprovalChars)
		return t
	}
	b, err := json.Marshal(approvalRow{
		State: text(a.GetState()), Scope: text(a.GetScope()), DecidedBy: text(a.GetDecidedBy()),
		DecidedAt: a.GetDecidedAtUnixMilli(), WaitedMS: a.GetWaitedMs(), RequestID: text(a.GetRequestId()),
	})
	if err != nil {
		return nil // not reached: the row holds only strings and numbers
	}
	s := string(b)
	return &s
}

// ParseApproval reads the approval column back; nil for NULL (or a value
// that is not an approval).
func ParseApproval(s *string) *historyv1.Approval {
	if s == nil {
		return nil
	}
	var row approvalRow
	if json.Unmarshal([]byte(*s), &row) != nil {
		return nil
	}
	return &historyv1.Approval{
		State: row.State, Scope: row.Scope, DecidedBy: row.DecidedBy,
		DecidedAtUnixMilli: row.DecidedAt, WaitedMs: row.WaitedMS, RequestId: row.RequestID,
	}
}

// AuditFilter is a validated AuditQuery.
type AuditFilter struct {
	Since, Until int64
	Tool, Caller string
	Session      string
	ErrorsOnly   bool
	Text         string
	Limit        int
	AfterSeq     int64
	// Follow is the after-seq mode (q.Follow, or an after_seq above 0).
	Follow     bool
	HasCursor  bool
	CursorTime int64
	CursorID   string
}

// ParseAuditQuery validates q: the text filter is long enough, the cursor
// is one of ours (ignored with AfterSeq), the limit is bounded.
func ParseAuditQuery(q *historyv1.AuditQuery) (AuditFilter, error) {
	f := AuditFilter{
		Since:      q.GetSinceUnixNano(),
		Until:      q.GetUntilUnixNano(),
		Tool:       Clean(q.GetTool()),
		Caller:     Clean(q.GetCaller()),
		Session:    Clean(q.GetSession()),
		ErrorsOnly: q.GetErrorsOnly(),
		Text:       Clean(q.GetText()),
		Limit:      PageLimit(int(q.GetLimit())),
		AfterSeq:   q.GetAfterSeq(),
		Follow:     q.GetFollow() || q.GetAfterSeq() > 0,
	}
	if f.AfterSeq < 0 {
		return f, fmt.Errorf("%w: negative after_seq", ErrInvalid)
	}
	if f.Text != "" {
		if err := CheckText(f.Text); err != nil {
			return f, err
		}
	}
	if q.GetCursor() != "" && !f.Follow {
		t, id, err := ParseAuditCursor(q.GetCursor())
		if err != nil {
			return f, err
		}
		f.HasCursor, f.CursorTime, f.CursorID = true, t, id
	}
	return f, nil
}

// Dialect is what differs between backends in QueryAudit's SQL.
type Dialect struct {
	// Placeholder is the n-th (1-based) parameter: "?" or "$n".
	Placeholder func(n int) string
	// Text is the condition for a text filter; arg adds a parameter and
	// returns its placeholder.
	Text func(arg func(v any) string, text string) string
	// Columns are the columns to read: AuditColumns when empty, or
	// AuditColumnsBeforeApproval on an older schema.
	Columns string
}

// AuditSQL builds QueryAudit's statement for f: one page plus one row (to
// know whether there is a next page). A session filter becomes the union of
// two index-ordered, limited scans (mcp_session and browser_session) so
// that it stays index-driven.
func AuditSQL(f AuditFilter, d Dialect) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return d.Placeholder(len(args))
	}
	columns := d.Columns
	if columns == "" {
		columns = AuditColumns
	}
	order := "time_unix_nano DESC, id DESC"
	if f.Follow {
		order = "seq"
	}
	limit := f.Limit + 1
	where := func(extra string) string {
		var c []string
		if extra != "" {
			c = append(c, extra)
		}
		if f.Since != 0 {
			c = append(c, "time_unix_nano >= "+arg(f.Since))
		}
		if f.Until != 0 {
			c = append(c, "time_unix_nano < "+arg(f.Until))
		}
		if f.Tool != "" {
			c = append(c, "tool = "+arg(f.Tool))
		}
		if f.Caller != "" {
			c = append(c, "caller = "+arg(f.Caller))
		}
		if f.ErrorsOnly {
			// A literal, so the partial index audit_errors applies.
			c = append(c, "outcome <> 'ok'")
		}
		if f.Text != "" {
			c = append(c, d.Text(arg, f.Text))
		}
		if f.Follow {
			c = append(c, "seq > "+arg(f.AfterSeq))
		} else if f.HasCursor {
			t := arg(f.CursorTime)
			c = append(c, "(time_unix_nano, id) < ("+t+", "+arg(f.CursorID)+")")
		}
		if len(c) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(c, " AND ")
	}
	if f.Session == "" {
		q := "SELECT " + columns + " FROM audit" + where("") + " ORDER BY " + order + " LIMIT " + arg(limit)
		return q, args
	}
	branch := func(col, alias string) string {
		return "SELECT * FROM (SELECT " + columns + " FROM audit" + where(col+" = "+arg(f.Session)) +
			" ORDER BY " + order + " LIMIT " + arg(limit) + ") AS " + alias
	}
	q := branch("mcp_session", "m") + " UNION " + branch("browser_session", "b") + " ORDER BY " + order + " LIMIT " + arg(limit)
	return q, args
}

// AuditPage makes the page of f from the rows AuditSQL returned.
func AuditPage(f AuditFilter, recs []*historyv1.AuditRecord) *historyv1.AuditPage {
	p := &historyv1.AuditPage{Records: recs}
	if len(recs) > f.Limit {
		p.Records = recs[:f.Limit]
		if !f.Follow {
			last := p.Records[len(p.Records)-1]
			p.NextCursor = AuditCursor(last.GetTimeUnixNano(), last.GetId())
		}
	}
	return p
}
