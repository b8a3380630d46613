package page

import (
	"context"
	"encoding/base64"
	"fmt"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// The network log: every tab keeps its last requests in a ring (method,
// URL, type, status, size, duration, and for a request the URL policy
// refused, the rule), so that network_requests can list them and
// network_request can fetch one body while the browser still holds it.
const (
	// DefaultNetworkBuffer is how many requests a tab keeps when
	// Options.NetworkBuffer is 0.
	DefaultNetworkBuffer = 500
	// defaultNetworkLimit is how many requests network_requests returns
	// when the call does not say.
	defaultNetworkLimit = 100
	// DefaultBodyBytes is how much of a body network_request returns when
	// the call does not say; MaxBodyBytes the most it may ask for.
	DefaultBodyBytes = 20000
	MaxBodyBytes     = 1 << 20
)

// netEntry is one request of the tab.
type netEntry struct {
	ID       string `json:"id"`
	Method   string `json:"method"`
	URL      string `json:"url"`
	Type     string `json:"type"`
	Status   int64  `json:"status,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	// Size is the bytes received (headers and body, as sent), when done.
	Size float64 `json:"size,omitempty"`
	// DurationMS is from the request to its last byte (or failure).
	DurationMS int64  `json:"duration_ms,omitempty"`
	Failed     string `json:"failed,omitempty"`
	// BlockedBy is the URL policy rule that refused the request.
	BlockedBy string `json:"blocked_by,omitempty"`
	Pending   bool   `json:"pending,omitempty"`
	HasBody   bool   `json:"has_request_body,omitempty"`

	rid   network.RequestID
	start time.Time
}

// netRing holds the last requests of a tab, oldest first. Guarded by
// Tab.mu.
type netRing struct {
	size    int
	entries []*netEntry
	byID    map[network.RequestID]*netEntry // the entries in flight
	next    int64
	dropped int64
}

func (r *netRing) add(e *netEntry) {
	if r.byID == nil {
		r.byID = map[network.RequestID]*netEntry{}
	}
	r.next++
	e.ID = "r" + strconv.FormatInt(r.next, 10)
	if len(r.entries) >= r.size {
		n := len(r.entries) - r.size + 1
		for _, old := range r.entries[:n] {
			if r.byID[old.rid] == old {
				delete(r.byID, old.rid)
			}
		}
		r.entries = append(r.entries[:0], r.entries[n:]...)
		r.dropped += int64(n)
	}
	r.entries = append(r.entries, e)
	r.byID[e.rid] = e
}

// finish ends the request rid (its entry leaves the in-flight table).
func (r *netRing) finish(rid network.RequestID, f func(*netEntry)) {
	if e, ok := r.byID[rid]; ok {
		f(e)
		e.Pending = false
		e.DurationMS = time.Since(e.start).Milliseconds()
		delete(r.byID, rid)
	}
}

// onNetwork records a network event (from onEvent, with Tab.mu held).
func (d *devtools) onNetwork(ev any) {
	r := &d.network
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request == nil {
			return
		}
		if ev.RedirectResponse != nil {
			// The same request id goes on to the next URL: end the hop.
			r.finish(ev.RequestID, func(e *netEntry) { e.Status, e.MIMEType = ev.RedirectResponse.Status, ev.RedirectResponse.MimeType })
		}
		r.add(&netEntry{rid: ev.RequestID, start: time.Now(), Method: ev.Request.Method, URL: clipTo(ev.Request.URL, maxURL),
			Type: string(ev.Type), Pending: true, HasBody: ev.Request.HasPostData})
	case *network.EventResponseReceived:
		if e, ok := r.byID[ev.RequestID]; ok && ev.Response != nil {
			e.Status, e.MIMEType = ev.Response.Status, clipTo(ev.Response.MimeType, 100)
		}
	case *network.EventLoadingFinished:
		r.finish(ev.RequestID, func(e *netEntry) { e.Size = ev.EncodedDataLength })
	case *network.EventLoadingFailed:
		r.finish(ev.RequestID, func(e *netEntry) {
			e.Failed = clipTo(ev.ErrorText, 200)
			if ev.Canceled {
				e.Failed = "canceled"
			}
			if ev.BlockedReason != "" {
				e.Failed += " (" + string(ev.BlockedReason) + ")"
			}
		})
	}
}

// SetBlocked gives the tab the requests its session's URL policy refused,
// so that network_requests can name the rule of each.
func (t *Tab) SetBlocked(blocked func() []*browserv1.BlockedRequest) {
	t.mu.Lock()
	t.devtools.blocked = blocked
	t.mu.Unlock()
}

// netFilter is what network_requests asks for.
type netFilter struct {
	substr string
	re     *regexp.Regexp
	typ    string
	status string
}

func parseNetFilter(req *browserv1.NetworkRequests) (netFilter, error) {
	f := netFilter{typ: strings.ToLower(strings.TrimSpace(req.GetResourceType())), status: strings.ToLower(strings.TrimSpace(req.GetStatus()))}
	if s := req.GetFilter(); len(s) >= 2 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/") {
		re, err := regexp.Compile(s[1 : len(s)-1])
		if err != nil {
			return f, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "filter %s is not a valid regular expression: %v", clipTo(s, 200), err)
		}
		f.re = re
	} else {
		f.substr = s
	}
	switch st := f.status; {
	case st == "", st == "failed":
	case len(st) == 3 && st[0] >= '1' && st[0] <= '5' && st[1:] == "xx":
	default:
		if n, err := strconv.Atoi(st); err != nil || n < 100 || n > 599 {
			return f, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "status %q is not an HTTP status (404), a class (4xx) or \"failed\"", req.GetStatus())
		}
	}
	return f, nil
}

func (f netFilter) match(e *netEntry) bool {
	switch {
	case f.re != nil && !f.re.MatchString(e.URL):
		return false
	case f.substr != "" && !strings.Contains(e.URL, f.substr):
		return false
	case f.typ != "" && strings.ToLower(e.Type) != f.typ:
		return false
	}
	switch st := f.status; {
	case st == "":
		return true
	case st == "failed":
		return e.Failed != ""
	case strings.HasSuffix(st, "xx"):
		return e.Status/100 == int64(st[0]-'0')
	default:
		return strconv.FormatInt(e.Status, 10) == st
	}
}

// networkRequests is the network_requests tool.
func (d *devtools) networkRequests(_ context.Context, req *browserv1.NetworkRequests) (*browserv1.ToolResult, error) {
	f, err := parseNetFilter(req)
	if err != nil {
		return nil, err
	}
	limit, err := listLimit(req.GetLimit(), defaultNetworkLimit, d.tab.opts.networkBuffer(), "network_requests")
	if err != nil {
		return nil, err
	}
	d.tab.mu.Lock()
	var picked []netEntry
	for _, e := range d.network.entries {
		if f.match(e) {
			picked = append(picked, *e)
		}
	}
	dropped, blocked := d.network.dropped, d.blocked
	d.tab.mu.Unlock()
	if blocked != nil {
		nameRules(picked, blocked())
	}
	picked, lines, left := newest(picked, limit, d.tab.capChars(DefaultTextChars))
	head := fmt.Sprintf("%d requests, oldest first", len(picked))
	switch len(picked) {
	case 0:
		head = "no requests"
	case 1:
		head = "1 request"
	}
	if req.GetFilter() != "" || f.typ != "" || f.status != "" {
		head += " matching"
	}
	if left > 0 {
		head += fmt.Sprintf("; %d older matching requests not shown (limit %d, max_chars)", left, limit)
	}
	if dropped > 0 {
		head += fmt.Sprintf("; the tab keeps the last %d requests (%d older ones were dropped)", d.tab.opts.networkBuffer(), dropped)
	}
	if len(picked) > 0 {
		head += "; network_request with an id returns a body"
	}
	res := textResult("%s", strings.Join(append([]string{head}, lines...), "\n"))
	SetStructured(res, "requests", picked)
	return res, nil
}

// nameRules marks the failed requests that the URL policy refused with
// its rule (the newest refusal of the same URL).
func nameRules(entries []netEntry, blocked []*browserv1.BlockedRequest) {
	if len(blocked) == 0 {
		return
	}
	rules := make(map[string]string, len(blocked))
	for _, b := range blocked {
		rules[clipTo(b.GetUrl(), maxURL)] = b.GetRule()
	}
	for i := range entries {
		if e := &entries[i]; e.Failed != "" {
			if r, ok := rules[e.URL]; ok {
				e.BlockedBy = r
			}
		}
	}
}

// line is how a request reads in the text of the result.
func (e netEntry) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", e.ID, e.Method, e.URL, e.Type)
	switch {
	case e.BlockedBy != "":
		fmt.Fprintf(&b, " — blocked by the URL policy: %s", e.BlockedBy)
	case e.Failed != "":
		fmt.Fprintf(&b, " — failed: %s", e.Failed)
	case e.Pending && e.Status == 0:
		b.WriteString(" — pending")
	default:
		fmt.Fprintf(&b, " → %d", e.Status)
		if e.MIMEType != "" {
			b.WriteString(" " + e.MIMEType)
		}
	}
	if !e.Pending {
		fmt.Fprintf(&b, ", %d B, %d ms", int64(e.Size), e.DurationMS)
	}
	return b.String()
}

// networkRequest is the network_request tool: one body of a request the
// tab still holds.
func (d *devtools) networkRequest(ctx context.Context, req *browserv1.NetworkRequestBody) (*browserv1.ToolResult, error) {
	id := strings.TrimSpace(req.GetId())
	part := strings.ToLower(strings.TrimSpace(req.GetPart()))
	if part == "" {
		part = "response"
	}
	if part != "response" && part != "request" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "part must be response or request, not %q", req.GetPart())
	}
	maxBytes := int(req.GetMaxBytes())
	switch {
	case maxBytes == 0:
		maxBytes = DefaultBodyBytes
	case maxBytes < 0 || maxBytes > MaxBodyBytes:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "max_bytes must be 1-%d, not %d", MaxBodyBytes, maxBytes)
	}
	d.tab.mu.Lock()
	var found *netEntry
	for _, e := range d.network.entries {
		if e.ID == id {
			c := *e
			found = &c
		}
	}
	d.tab.mu.Unlock()
	if found == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND,
			"no request %q in this tab: take the id from network_requests (the tab keeps its last %d requests)", clipTo(id, 100), d.tab.opts.networkBuffer())
	}
	var body []byte
	isText := true
	switch part {
	case "request":
		if !found.HasBody {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "request %s (%s %s) sent no body", id, found.Method, found.URL)
		}
		r, err := chromedp.Call(ctx, network.GetRequestPostData, network.GetRequestPostDataParams{RequestID: found.rid})
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "the body of request %s is no longer available: %s", id, clipText(err.Error()))
		}
		// cdproto decodes a base64 body.
		body, isText = r.PostData, utf8.Valid(r.PostData)
	default:
		if found.Pending {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "request %s has no response body yet: it is still pending", id)
		}
		if found.Failed != "" {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "request %s has no response body: it failed (%s)", id, found.Failed)
		}
		r, err := chromedp.Call(ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: found.rid})
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND,
				"the response body of request %s is no longer available (the browser drops bodies after a navigation or when its buffer is full): %s", id, clipText(err.Error()))
		}
		body = r.Body
		isText = !r.Base64encoded || utf8.Valid(body) && !strings.HasPrefix(found.MIMEType, "image/")
	}
	total := len(body)
	// Scrub, then cut: a cut across a secret would keep its first part.
	body = []byte(secrets.ScrubAll(string(body)))
	cut := len(body) > maxBytes
	if cut {
		body = body[:maxBytes]
	}
	text, encoding := string(body), "text"
	if isText {
		text = strings.ToValidUTF8(text, "") // a cut may split a character
	} else {
		text, encoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	head := fmt.Sprintf("%s body of %s %s %s (%d bytes, %s", part, id, found.Method, found.URL, total, encoding)
	if cut {
		head += fmt.Sprintf("; the first %d shown: pass a larger max_bytes, at most %d, for more", maxBytes, MaxBodyBytes)
	}
	head += "):"
	res := textResult("%s\n%s", head, text)
	SetStructured(res, "body", map[string]any{"id": id, "part": part, "bytes": total, "encoding": encoding, "cut": cut, "mime_type": found.MIMEType})
	return res, nil
}
