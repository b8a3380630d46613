package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// sourceTimeout bounds one call to a source while rendering a page.
const sourceTimeout = 10 * time.Second

// recentDecisions is how many decided approvals the page shows.
const recentDecisions = 20

// auditPageSize is how many audit records one page shows.
const auditPageSize = 50

// page is what every page template gets.
type page struct {
	Title   string
	Nav     string // the active nav entry
	Pending int    // pending approvals, -1 when unknown
	User    string
	Notice  string // a success message
	Error   string // a failure message
	Data    any
}

var pageNames = []string{"approvals", "audit", "detail", "sessions", "tokens", "secrets", "chats", "chat", "chat_settings"}

// partials are the live parts of pages: each page includes its partial,
// and the partial also renders alone for the page's script to fetch.
var partials = map[string]string{"approvals": "approval_lists", "chat": "chat_messages"}

// navOf is the nav entry of pages that are not one themselves.
var navOf = map[string]string{"detail": "audit", "chats": "chat", "chat_settings": "chat"}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range append(slices.Clone(pageNames), "login", "approval_lists", "chat_messages") {
		files := []string{"templates/layout.html", "templates/" + name + ".html"}
		if p, ok := partials[name]; ok {
			files = append(files, "templates/"+p+".html")
		}
		if name == "login" || name == "approval_lists" || name == "chat_messages" {
			files = files[1:]
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, files...)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		out[name] = t
	}
	if _, err := fs.Stat(assets, "static/console.css"); err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	return out, nil
}

var funcs = template.FuncMap{
	"ago":    func(t time.Time) string { return human(time.Since(t)) + " ago" },
	"clock":  clock,
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"micros": func(us int64) string { return human(time.Duration(us) * time.Microsecond) },
	"nanos":  func(ns int64) time.Time { return time.Unix(0, ns) },
	"short":  func(s string) string { return s[:min(len(s), 12)] },
	"clip": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n]) + "…"
		}
		return s
	},
	"pretty":  prettyJSON,
	"plain":   unescapeHTML,
	"outcome": outcomeName,
	"zero":    func(t time.Time) bool { return t.IsZero() },
}

// human renders a duration the short way: 850ms, 12s, 3m 05s, 2h 10m, 3d 4h.
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t = t.Local()
	if time.Since(t) < 20*time.Hour {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// prettyJSON indents JSON text, keeping its key order, and shows <, > and
// & as themselves rather than Go's \u003c escapes; other text (a
// truncated record) stays as it is.
func prettyJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return unescapeHTML(b.String())
}

// unescapeHTML turns the \u003c, \u003e and \u0026 escapes of JSON text
// back into <, > and &, leaving every other escape (an escaped backslash
// before "u003c" included) as it is.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch s[i+2 : i+6] {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2]) // any other escape, kept whole
		i++
	}
	return b.String()
}

func outcomeName(o historyv1.Outcome) string {
	switch o {
	case historyv1.Outcome_OUTCOME_OK:
		return "ok"
	case historyv1.Outcome_OUTCOME_ERROR:
		return "error"
	case historyv1.Outcome_OUTCOME_DENIED:
		return "denied"
	case historyv1.Outcome_OUTCOME_TIMEOUT:
		return "timeout"
	}
	return "unknown"
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.User = loginFrom(r.Context()).name
	p.Nav = name
	if n, ok := navOf[name]; ok {
		p.Nav = n
	}
	p.Pending = c.pendingCount(r.Context())
	c.exec(w, status, name, "layout", p)
}

func (c *Console) exec(w http.ResponseWriter, status int, name, tmpl string, data any) {
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, tmpl, data); err != nil {
		c.log.Error("render console page", "page", name, "err", err)
		http.Error(w, "internal error rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (c *Console) renderLogin(w http.ResponseWriter, status int, next, msg string) {
	c.exec(w, status, "login", "login", page{Title: "Log in", Error: msg, Data: localPath(next)})
}

func (c *Console) pendingCount(ctx context.Context) int {
	if c.src.Approvals == nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	list, err := c.src.Approvals.List(ctx)
	if err != nil {
		return -1
	}
	n := 0
	for _, a := range list {
		if a.State == approval.Pending {
			n++
		}
	}
	return n
}

// errText is the message of a source's error for a page: a bus error's own
// message without the wrapping.
func errText(what string, err error) string {
	var be *bus.Error
	if errors.As(err, &be) && be.Message != "" {
		return what + ": " + be.Message
	}
	return what + ": " + err.Error()
}

// --- approvals ---

// approvalLists is the approvals page's live part.
type approvalLists struct {
	Configured bool
	Error      string
	Pending    []approval.Request
	Recent     []approval.Request
}

func (c *Console) approvalLists(ctx context.Context) approvalLists {
	if c.src.Approvals == nil {
		return approvalLists{}
	}
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	all, err := c.src.Approvals.List(ctx)
	if err != nil {
		return approvalLists{Configured: true, Error: errText("read the approval queue", err)}
	}
	out := approvalLists{Configured: true}
	for _, a := range all {
		a = public(a)
		if a.State == approval.Pending {
			out.Pending = append(out.Pending, a)
		} else {
			out.Recent = append(out.Recent, a)
		}
	}
	slices.SortFunc(out.Pending, func(a, b approval.Request) int { return a.Created.Compare(b.Created) })
	slices.SortFunc(out.Recent, func(a, b approval.Request) int { return b.DecidedAt.Compare(a.DecidedAt) })
	if len(out.Recent) > recentDecisions {
		out.Recent = out.Recent[:recentDecisions]
	}
	return out
}

var approvalNotices = map[string]string{
	"once":    "Approved once.",
	"session": "Approved for the rest of the browser session.",
	"deny":    "Denied.",
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request) {
	lists := c.approvalLists(r.Context())
	if r.URL.Query().Get("part") == "lists" {
		// The live part alone, fetched by the page's script on each change.
		c.exec(w, http.StatusOK, "approval_lists", "approval_lists", lists)
		return
	}
	p := page{Title: "Approvals", Data: lists, Notice: approvalNotices[r.URL.Query().Get("done")]}
	if r.URL.Query().Get("done") == "already" {
		p.Error = "That request was already decided (or timed out) before your decision arrived."
	}
	c.render(w, r, http.StatusOK, "approvals", p)
}

// public is a request as the console shows it: without its owner, a
// digest of the caller's credential that is for the gateway only.
func public(a approval.Request) approval.Request {
	a.Owner = ""
	return a
}

// decision reads "once", "session" or "deny".
func decision(v string) (approve bool, scope approval.Scope, err error) {
	switch v {
	case "once":
		return true, approval.Once, nil
	case "session":
		return true, approval.Session, nil
	case "deny":
		return false, approval.Once, nil
	}
	return false, "", fmt.Errorf("decision %q: want once, session or deny", v)
}

// decide runs a decision; status is the HTTP status of its failure.
func (c *Console) decide(r *http.Request, id, how, note string) (approval.Request, int, error) {
	if c.src.Approvals == nil {
		return approval.Request{}, http.StatusNotFound, errors.New("approvals are not configured on this gateway")
	}
	approve, scope, err := decision(how)
	if err != nil {
		return approval.Request{}, http.StatusBadRequest, err
	}
	if len(note) > 500 {
		note = note[:500]
	}
	ctx, cancel := context.WithTimeout(r.Context(), sourceTimeout)
	defer cancel()
	req, err := c.src.Approvals.Decide(ctx, id, approve, scope, by(r), strings.TrimSpace(note))
	switch {
	case errors.Is(err, approval.ErrDecided):
		return req, http.StatusConflict, err
	case errors.Is(err, approval.ErrNotFound):
		return req, http.StatusNotFound, err
	case err != nil:
		return req, http.StatusInternalServerError, err
	}
	c.log.Info("approval decided in the console", "id", id, "tool", req.Tool, "decision", how, "by", by(r))
	return req, 0, nil
}

func (c *Console) decideForm(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	how := r.PostForm.Get("decision")
	_, status, err := c.decide(r, r.PathValue("id"), how, r.PostForm.Get("note"))
	switch {
	case status == http.StatusConflict:
		how = "already"
	case err != nil:
		c.render(w, r, status, "approvals", page{Title: "Approvals", Data: c.approvalLists(r.Context()),
			Error: "The decision failed: " + err.Error()})
		return
	}
	http.Redirect(w, r, "/approvals?done="+url.QueryEscape(how), http.StatusSeeOther)
}

func (c *Console) apiApprovals(w http.ResponseWriter, r *http.Request) {
	if c.src.Approvals == nil {
		apiError(w, http.StatusNotFound, "approvals are not configured on this gateway")
		return
	}
	l := c.approvalLists(r.Context())
	if l.Error != "" {
		apiError(w, http.StatusBadGateway, l.Error)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"pending": nonNil(l.Pending), "recent": nonNil(l.Recent)})
}

func (c *Console) apiDecide(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Decision string `json:"decision"`
		Note     string `json:"note"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, `the body must be JSON like {"decision":"once|session|deny","note":"…"}: `+err.Error())
		return
	}
	req, status, err := c.decide(r, r.PathValue("id"), body.Decision, body.Note)
	if err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, public(req))
}

// apiApprovalEvents streams the queue's changes as server-sent events
// ("approval", the request as JSON), with a comment every 15 s to keep
// proxies from closing the stream.
func (c *Console) apiApprovalEvents(w http.ResponseWriter, r *http.Request) {
	if c.src.Approvals == nil {
		apiError(w, http.StatusNotFound, "approvals are not configured on this gateway")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch, err := c.src.Approvals.Watch(ctx)
	if err != nil {
		apiError(w, http.StatusBadGateway, errText("watch the approval queue", err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 3000\n: watching the approval queue\n\n")
	flusher.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case a, ok := <-ch:
			if !ok {
				return
			}
			data, _ := json.Marshal(public(a))
			if _, err := fmt.Fprintf(w, "event: approval\ndata: %s\n\n", data); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

// --- audit ---

// auditView is the audit page's data.
type auditView struct {
	Configured bool
	Q          auditForm
	Records    []*historyv1.AuditRecord
	Older      string // URL of the next page, "" at the end
	First      bool   // this is the newest page
}

type auditForm struct {
	Text, Tool, Caller, Session string
	Errors                      bool
	Cursor                      string
}

func readAuditForm(v url.Values) auditForm {
	return auditForm{
		Text:    strings.TrimSpace(v.Get("text")),
		Tool:    strings.TrimSpace(v.Get("tool")),
		Caller:  strings.TrimSpace(v.Get("caller")),
		Session: strings.TrimSpace(v.Get("session")),
		Errors:  v.Get("errors") != "" && v.Get("errors") != "0" && v.Get("errors") != "false",
		Cursor:  v.Get("cursor"),
	}
}

func (f auditForm) query(limit int32) *historyv1.AuditQuery {
	return &historyv1.AuditQuery{Text: f.Text, Tool: f.Tool, Caller: f.Caller, Session: f.Session,
		ErrorsOnly: f.Errors, Cursor: f.Cursor, Limit: limit}
}

func (f auditForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"text": f.Text, "tool": f.Tool, "caller": f.Caller, "session": f.Session, "cursor": f.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Errors {
		v.Set("errors", "1")
	}
	return v
}

// Base is the query string of the filters without the cursor (the newest
// page).
func (f auditForm) Base() string {
	f.Cursor = ""
	return f.values().Encode()
}

func (c *Console) queryAudit(ctx context.Context, q *historyv1.AuditQuery) (*historyv1.AuditPage, error) {
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	return c.src.Audit(ctx, q)
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	f := readAuditForm(r.URL.Query())
	v := auditView{Configured: c.src.Audit != nil, Q: f, First: f.Cursor == ""}
	p := page{Title: "Audit trail", Data: &v}
	if c.src.Audit != nil {
		res, err := c.queryAudit(r.Context(), f.query(auditPageSize))
		if err != nil {
			p.Error = errText("read the audit trail", err)
		} else {
			v.Records = res.GetRecords()
			if res.GetNextCursor() != "" {
				next := f
				next.Cursor = res.GetNextCursor()
				v.Older = "/audit?" + next.values().Encode()
			}
		}
	}
	c.render(w, r, http.StatusOK, "audit", p)
}

var errNoRecord = errors.New("audit record not found")

// findRecord fetches one record by id. The link to it carries the call's
// start time, so one exact time window finds it.
func (c *Console) findRecord(ctx context.Context, id, at string) (*historyv1.AuditRecord, error) {
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil || ns <= 0 {
		return nil, fmt.Errorf("%w: the link lacks the call's time (t=…); open the record from the audit list", errNoRecord)
	}
	q := &historyv1.AuditQuery{SinceUnixNano: ns, UntilUnixNano: ns + 1, Limit: 1000}
	for range 20 {
		page, err := c.queryAudit(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, rec := range page.GetRecords() {
			if rec.GetId() == id {
				return rec, nil
			}
		}
		if page.GetNextCursor() == "" {
			break
		}
		q.Cursor = page.GetNextCursor()
	}
	return nil, fmt.Errorf("%w: no record %s at that time (the retention may have pruned it)", errNoRecord, id)
}

type detailView struct {
	Record     *historyv1.AuditRecord
	Approval   []field // the approval that let the call through, when recorded
	Arguments  string
	ArgsNote   string // says when the trail kept only the start
	ResultNote string
}

// cutNote says how much of a text the trail kept, or "" for all of it.
func cutNote(kept string, total int32) string {
	if n := utf8.RuneCountInString(kept); int(total) > n {
		return fmt.Sprintf("(the trail keeps the first %d of %d characters)", n, total)
	}
	return ""
}

type field struct{ Name, Value string }

func (c *Console) auditDetail(w http.ResponseWriter, r *http.Request) {
	if c.src.Audit == nil {
		c.render(w, r, http.StatusNotFound, "detail", page{Title: "Audit record", Error: "The audit trail is not configured on this gateway."})
		return
	}
	rec, err := c.findRecord(r.Context(), r.PathValue("id"), r.URL.Query().Get("t"))
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, errNoRecord) {
			status = http.StatusNotFound
		}
		c.render(w, r, status, "detail", page{Title: "Audit record", Error: errText("find the record", err)})
		return
	}
	v := detailView{Record: rec, Arguments: prettyJSON(rec.GetArguments()), Approval: approvalFields(rec),
		ArgsNote: cutNote(rec.GetArguments(), rec.GetArgumentsChars()), ResultNote: cutNote(rec.GetResult(), rec.GetResultChars())}
	c.render(w, r, http.StatusOK, "detail", page{Title: rec.GetTool() + " · audit record", Data: v})
}

func (c *Console) apiAudit(w http.ResponseWriter, r *http.Request) {
	if c.src.Audit == nil {
		apiError(w, http.StatusNotFound, "the audit trail is not configured on this gateway")
		return
	}
	f := readAuditForm(r.URL.Query())
	limit := int32(auditPageSize)
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n <= 1000 {
		limit = int32(n)
	}
	res, err := c.queryAudit(r.Context(), f.query(limit))
	if err != nil {
		status := http.StatusBadGateway
		if bus.CodeOf(err) == commonv1.ErrorCode_INVALID_ARGUMENT { // a bad filter
			status = http.StatusBadRequest
		}
		apiError(w, status, errText("audit query", err))
		return
	}
	writeProto(w, res)
}

// --- sessions ---

type sessionsView struct {
	Configured bool
	Sessions   []Session
}

func (c *Console) listSessions(ctx context.Context) ([]Session, error) {
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	list, err := c.src.Sessions(ctx)
	slices.SortFunc(list, func(a, b Session) int { return b.Touched.Compare(a.Touched) })
	return list, err
}

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request) {
	v := sessionsView{Configured: c.src.Sessions != nil}
	p := page{Title: "Sessions", Data: &v}
	if r.URL.Query().Get("done") == "closed" {
		p.Notice = "Session closed. Its client's next call opens a fresh browser session."
	}
	if r.URL.Query().Get("done") == "gone" {
		p.Error = "That session was already gone."
	}
	if c.src.Sessions != nil {
		var err error
		if v.Sessions, err = c.listSessions(r.Context()); err != nil {
			p.Error = errText("list sessions", err)
		}
	}
	c.render(w, r, http.StatusOK, "sessions", p)
}

func (c *Console) closeSession(r *http.Request, id string) (int, error) {
	if c.src.CloseSession == nil {
		return http.StatusNotFound, errors.New("closing sessions is not configured on this gateway")
	}
	ctx, cancel := context.WithTimeout(r.Context(), sourceTimeout)
	defer cancel()
	if err := c.src.CloseSession(ctx, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return http.StatusNotFound, err
		}
		return http.StatusInternalServerError, err
	}
	c.log.Info("session closed in the console", "session", id[:min(len(id), 20)], "by", by(r))
	return 0, nil
}

func (c *Console) closeForm(w http.ResponseWriter, r *http.Request) {
	status, err := c.closeSession(r, r.PathValue("id"))
	switch {
	case status == http.StatusNotFound && c.src.CloseSession != nil:
		http.Redirect(w, r, "/sessions?done=gone", http.StatusSeeOther)
	case err != nil:
		v := sessionsView{Configured: c.src.Sessions != nil}
		if c.src.Sessions != nil {
			v.Sessions, _ = c.listSessions(r.Context())
		}
		c.render(w, r, status, "sessions", page{Title: "Sessions", Data: &v, Error: "Closing the session failed: " + err.Error()})
	default:
		http.Redirect(w, r, "/sessions?done=closed", http.StatusSeeOther)
	}
}

func (c *Console) apiSessions(w http.ResponseWriter, r *http.Request) {
	if c.src.Sessions == nil {
		apiError(w, http.StatusNotFound, "sessions are not configured on this gateway")
		return
	}
	list, err := c.listSessions(r.Context())
	if err != nil {
		apiError(w, http.StatusBadGateway, errText("list sessions", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": nonNil(list)})
}

func (c *Console) apiClose(w http.ResponseWriter, r *http.Request) {
	if status, err := c.closeSession(r, r.PathValue("id")); err != nil {
		apiError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"closed": r.PathValue("id")})
}

// --- tokens and secrets ---

type listView[T any] struct {
	Configured bool
	Items      []T
}

func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request) {
	v := listView[Token]{Configured: c.src.Tokens != nil}
	p := page{Title: "Tokens", Data: &v}
	if c.src.Tokens != nil {
		ctx, cancel := context.WithTimeout(r.Context(), sourceTimeout)
		defer cancel()
		var err error
		if v.Items, err = c.src.Tokens(ctx); err != nil {
			p.Error = errText("list tokens", err)
		}
	}
	c.render(w, r, http.StatusOK, "tokens", p)
}

func (c *Console) secretsPage(w http.ResponseWriter, r *http.Request) {
	v := listView[Secret]{Configured: c.src.Secrets != nil}
	p := page{Title: "Secrets", Data: &v}
	if c.src.Secrets != nil {
		ctx, cancel := context.WithTimeout(r.Context(), sourceTimeout)
		defer cancel()
		var err error
		if v.Items, err = c.src.Secrets(ctx); err != nil {
			p.Error = errText("list secrets", err)
		}
	}
	c.render(w, r, http.StatusOK, "secrets", p)
}

func (c *Console) apiTokens(w http.ResponseWriter, r *http.Request) {
	if c.src.Tokens == nil {
		apiError(w, http.StatusNotFound, "tokens are not configured on this gateway")
		return
	}
	list, err := c.src.Tokens(r.Context())
	if err != nil {
		apiError(w, http.StatusBadGateway, errText("list tokens", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": nonNil(list)})
}

func (c *Console) apiSecrets(w http.ResponseWriter, r *http.Request) {
	if c.src.Secrets == nil {
		apiError(w, http.StatusNotFound, "secrets are not configured on this gateway")
		return
	}
	list, err := c.src.Secrets(r.Context())
	if err != nil {
		apiError(w, http.StatusBadGateway, errText("list secrets", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": nonNil(list)})
}

// --- JSON helpers ---

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
