package page

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/chrome"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Limits of lighthouse_audit (lighthouse.go).
const (
	// LighthouseTimeout bounds one Lighthouse run when the call's
	// deadline is later.
	LighthouseTimeout = 60 * time.Second
	// LighthouseChars caps the text of a lighthouse_audit result; past it
	// the failed audits are cut with a marker (report attaches them all).
	LighthouseChars = 8000
	// maxLighthouseOutput caps what the runner may print (the Lighthouse
	// result, and the HTML report when asked for).
	maxLighthouseOutput = 32 << 20
	// lighthouseItems is how many flagged elements (or other items) a
	// failed audit shows.
	lighthouseItems = 3
	// lighthouseNotes is what the text keeps for the cut's marker and the
	// report's note.
	lighthouseNotes = 300
)

// installHint says how to give a worker Lighthouse.
const installHint = "install it with `make lighthouse` (npm ci in services/browser/lighthouse; needs Node.js >= 18.16 and npm) " +
	"and start the worker with --lighthouse-dir (SOVEREIGN_LIGHTHOUSE_DIR) set to that directory; the compose image has it"

// lighthouseRequest is what run.mjs (services/browser/lighthouse) reads on
// stdin.
type lighthouseRequest struct {
	WSEndpoint       string `json:"wsEndpoint"`
	TargetID         string `json:"targetId"`
	BrowserContextID string `json:"browserContextId,omitempty"`
	Mode             string `json:"mode"`
	Device           string `json:"device"`
	URL              string `json:"url,omitempty"`
	Report           string `json:"report,omitempty"`
}

// lighthouseOutput is what run.mjs prints on stdout.
type lighthouseOutput struct {
	LHR  json.RawMessage `json:"lhr"`
	HTML string          `json:"html"`
}

// lhr is the part of a Lighthouse result (LHR) the summary reads.
type lhr struct {
	LighthouseVersion string `json:"lighthouseVersion"`
	FinalDisplayedURL string `json:"finalDisplayedUrl"`
	RuntimeError      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"runtimeError"`
	RunWarnings []string `json:"runWarnings"`
	Categories  map[string]struct {
		Title     string   `json:"title"`
		Score     *float64 `json:"score"`
		AuditRefs []struct {
			ID string `json:"id"`
		} `json:"auditRefs"`
	} `json:"categories"`
	Audits map[string]struct {
		Title        string          `json:"title"`
		Score        *float64        `json:"score"`
		DisplayValue string          `json:"displayValue"`
		Details      json.RawMessage `json:"details"`
	} `json:"audits"`
}

// lighthouseCategories are the categories run.mjs asks for, in the order
// the result lists them.
var lighthouseCategories = []string{"accessibility", "best-practices", "seo"}

// LighthouseFailed is a failed audit as the structured result carries it.
type LighthouseFailed struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Category string   `json:"category"`
	Score    int      `json:"score"`
	Value    string   `json:"value,omitempty"`
	Items    []string `json:"items,omitempty"`
	More     int      `json:"more_items,omitempty"`
}

// lighthouseAudit is the lighthouse_audit tool: Google Lighthouse run by
// its Node runner on this tab, over a DevTools connection of its own.
func (p *perfTools) lighthouseAudit(ctx context.Context, req *browserv1.LighthouseAudit) (*browserv1.ToolResult, error) {
	mode, err := oneOf("mode", req.GetMode(), "navigation", "snapshot")
	if err != nil {
		return nil, err
	}
	device, err := oneOf("device", req.GetDevice(), "desktop", "mobile")
	if err != nil {
		return nil, err
	}
	report, err := oneOf("report", req.GetReport(), "", "json", "html")
	if err != nil {
		return nil, err
	}
	node, run, err := lighthouseRunner(p.tab.opts.LighthouseDir)
	if err != nil {
		return nil, err
	}
	ws := chrome.DevToolsURL(p.tab.ctx)
	c := chromedp.FromContext(p.tab.ctx)
	if ws == "" || c == nil || c.Target == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"lighthouse_audit: this tab's Chromium has no DevTools websocket for Lighthouse to connect to (it was started over a pipe)")
	}
	u, err := p.tab.currentURL(ctx)
	if err != nil {
		return nil, err
	}
	if p, perr := url.Parse(u); perr != nil || p.Scheme != "http" && p.Scheme != "https" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"lighthouse_audit audits web pages: the tab shows %s; open an http(s) page first", clipTo(u, maxURL))
	}
	lreq := lighthouseRequest{WSEndpoint: ws, TargetID: string(c.Target.TargetID), Mode: mode, Device: device, URL: u, Report: report}
	// The runner attaches only to targets of this browser context: without
	// it, its filter would let in every session's tabs.
	info, err := chromedp.CallBrowser(ctx, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: c.Target.TargetID})
	if err != nil || info.TargetInfo == nil || info.TargetInfo.BrowserContextID == "" {
		return nil, fmt.Errorf("lighthouse_audit: read the tab's browser context: %v", err)
	}
	lreq.BrowserContextID = string(info.TargetInfo.BrowserContextID)
	if slot := p.tab.opts.LighthouseSlot; slot != nil {
		// Wait no longer than the runner could run (2 s before the call's
		// deadline), so that the answer reaches the caller in time.
		wctx, cancel := context.WithCancel(ctx)
		if dl, ok := ctx.Deadline(); ok {
			wctx, cancel = context.WithDeadline(ctx, dl.Add(-lighthouseMargin))
		}
		waitStart := time.Now()
		select {
		case slot <- struct{}{}:
			cancel()
			defer func() { <-slot }()
		case <-wctx.Done():
			cancel()
			return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT,
				"lighthouse_audit: another Lighthouse audit ran on this browser worker for the whole %s this call could wait (one runs at a time per worker); retry", time.Since(waitStart).Round(100*time.Millisecond))
		}
	}
	start := time.Now()
	out, runErr := runLighthouse(ctx, node, run, lreq)
	took := time.Since(start)
	p.tab.restoreEmulation(ctx)
	if runErr != nil {
		return nil, runErr
	}
	var r lhr
	if err := json.Unmarshal(out.LHR, &r); err != nil {
		return nil, fmt.Errorf("read the Lighthouse result: %w", err)
	}
	if e := r.RuntimeError; e != nil && e.Code != "" {
		return nil, bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "Lighthouse could not audit %s: %s (%s)", clipTo(u, maxURL), clipText(e.Message), e.Code)
	}
	text, scores, failed := summarizeLighthouse(&r, mode, device, took)
	res := textResult("%s", text)
	SetStructured(res, "lighthouse", map[string]any{
		"version": r.LighthouseVersion, "mode": mode, "device": device, "url": clipTo(r.FinalDisplayedURL, maxURL),
		"scores": scores, "failed": failed, "duration_ms": took.Milliseconds(),
	})
	if report != "" {
		name, mime, data := "lighthouse.json", "application/json", []byte(out.LHR)
		if report == "html" {
			name, mime, data = "lighthouse.html", "text/html", []byte(out.HTML)
		}
		// Scrubbed before the size check: a placeholder may be longer
		// than its secret (the worker scrubs every file again).
		data = []byte(secrets.ScrubAll(string(data)))
		if max := p.tab.opts.maxProfileFileBytes(); len(data) > max {
			appendText(res, fmt.Sprintf("The %s report (%d bytes) is larger than the worker's file limit of %d bytes (--max-profile-file-mb): left out.", report, len(data), max))
		} else {
			appendText(res, fmt.Sprintf("The full report is attached as %s (%d bytes).", name, len(data)))
			res.Content = append(res.Content, resourcePart(name, mime, data))
		}
	}
	return res, nil
}

// oneOf returns v, or the first of allowed when v is empty; a value not in
// allowed is an INVALID_ARGUMENT error that lists them.
func oneOf(name, v string, allowed ...string) (string, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return allowed[0], nil
	}
	for _, a := range allowed {
		if v == a && a != "" {
			return v, nil
		}
	}
	names := slices.DeleteFunc(slices.Clone(allowed), func(a string) bool { return a == "" })
	return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s %q is not one of %s", name, clipTo(v, 50), strings.Join(names, ", "))
}

// lighthouseRunner returns the node executable and the run.mjs of the
// runner in dir, or an
// FAILED_PRECONDITION error that says what this worker lacks.
func lighthouseRunner(dir string) (node, run string, err error) {
	if dir == "" {
		return "", "", bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"lighthouse_audit: Lighthouse is not installed on this worker (it runs without --lighthouse-dir); %s", installHint)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"lighthouse_audit: Node.js (node) is not on this worker's PATH, so Lighthouse cannot run; install Node.js >= 18.16 (Debian: apt-get install nodejs npm), then %s", installHint)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "lighthouse", "package.json")); err != nil {
		return "", "", bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"lighthouse_audit: the Lighthouse runner in %s has no node_modules/lighthouse; %s", dir, installHint)
	}
	return node, filepath.Join(dir, "run.mjs"), nil
}

// lighthouseMargin is the part of the call's time kept for the answer:
// the runner stops, and a wait for the worker's slot ends, that long
// before the call's deadline.
const lighthouseMargin = 2 * time.Second

// restoreEmulation puts the session's own emulation (or none) back after
// Lighthouse, even after a failed run: a navigation emulates Lighthouse's
// device, and Chromium clears the viewport override when Lighthouse's
// DevTools connection closes. Chromium notices that close a moment after
// the runner exited (later on a loaded machine), possibly after the first
// restore, so a viewport the page does not show is set again, for up to
// 2 s and until half a second before the call's deadline.
func (t *Tab) restoreEmulation(call context.Context) {
	ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
	defer cancel()
	_ = applyEmulation(ctx, t.emu)
	if t.emu.Width <= 0 {
		return // the cleared viewport is the session's own
	}
	end := time.Now().Add(2 * time.Second)
	if dl, ok := call.Deadline(); ok && dl.Add(-500*time.Millisecond).Before(end) {
		end = dl.Add(-500 * time.Millisecond)
	}
	want := fmt.Sprintf("%dx%d", t.emu.Width, t.emu.Height)
	for wait := 100 * time.Millisecond; time.Now().Add(wait).Before(end); wait = min(2*wait, 500*time.Millisecond) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		got, err := jsViewport(ctx, t)
		if err != nil {
			continue
		}
		if got != want {
			_ = applyEmulation(ctx, t.emu)
		}
	}
}

// runLighthouse runs run.mjs with req on stdin until it exits or ctx (cut
// to LighthouseTimeout, and to 2 s before its deadline) ends, which kills
// it.
func runLighthouse(ctx context.Context, node, run string, req lighthouseRequest) (*lighthouseOutput, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// The runner stops a little before the call's deadline, so that the
	// result can say that Lighthouse ran out of time.
	limit := LighthouseTimeout
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl)-lighthouseMargin)
	}
	if limit < time.Second {
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "lighthouse_audit: too little of the call's time was left to run Lighthouse (%s)", max(limit+lighthouseMargin, 0).Round(100*time.Millisecond))
	}
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(lctx, node, run)
	cmd.Dir = filepath.Dir(run)
	cmd.Env = lighthouseEnv() // not the worker's: its secret key, NATS and LLM credentials
	cmd.Stdin = bytes.NewReader(in)
	stdout := &cappedBuffer{max: maxLighthouseOutput}
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	switch {
	case err == nil && !stdout.over:
		// Finished, even if its limit ran out just after.
	case lctx.Err() != nil && ctx.Err() == nil:
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "lighthouse_audit: Lighthouse did not finish within %s (the tool's limit is %s and the call's deadline); mode snapshot does not reload the page and is quicker", limit.Round(time.Second), LighthouseTimeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "lighthouse_audit: Lighthouse failed (%s): %s", ee.ProcessState, clipTo(lastLines(stderr.String(), 6), 1500))
		}
		return nil, fmt.Errorf("run Lighthouse: %w", err)
	case stdout.over:
		return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE, "lighthouse_audit: the Lighthouse result is larger than %d bytes", maxLighthouseOutput)
	}
	var out lighthouseOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.LHR) == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "lighthouse_audit: the runner printed no Lighthouse result: %s", clipTo(lastLines(stderr.String(), 6), 1500))
	}
	return &out, nil
}

// lighthouseEnv is the environment of the runner: only what Node.js and
// Lighthouse use from the worker's. The rest of it (SOVEREIGN_SECRET_KEY,
// which opens every operator secret; with `sovereign up` the LLM API key
// and the other services' settings too) stays out of the npm packages'
// reach.
func lighthouseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "NODE_EXTRA_CA_CERTS"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// summarizeLighthouse returns the result's text (at most LighthouseChars
// characters), the scores (0-100, -1 when Lighthouse gave none) and the
// failed audits.
func summarizeLighthouse(r *lhr, mode, device string, took time.Duration) (string, map[string]int, []LighthouseFailed) {
	scores := map[string]int{}
	var head []string
	var failed []LighthouseFailed
	seen := map[string]bool{}
	for _, id := range lighthouseCategories {
		c, ok := r.Categories[id]
		if !ok {
			continue
		}
		score := percent(c.Score)
		scores[id] = score
		head = append(head, fmt.Sprintf("%s %s", c.Title, scoreText(score)))
		for _, ref := range c.AuditRefs {
			a, ok := r.Audits[ref.ID]
			if !ok || a.Score == nil || *a.Score >= 1 || seen[ref.ID] {
				continue
			}
			seen[ref.ID] = true
			items, total := auditItems(a.Details, lighthouseItems)
			failed = append(failed, LighthouseFailed{ID: ref.ID, Title: a.Title, Category: id, Score: percent(a.Score),
				Value: a.DisplayValue, Items: items, More: total - len(items)})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Lighthouse %s, %s mode, %s, of %s in %.1f s: %s (0-100).\n", r.LighthouseVersion, mode, device,
		clipTo(r.FinalDisplayedURL, 300), took.Seconds(), strings.Join(head, ", "))
	if len(failed) == 0 {
		b.WriteString("No failed audits.\n")
	} else {
		fmt.Fprintf(&b, "%d failed audits (score 0-99; id, title, flagged items):\n", len(failed))
	}
	// What follows the failed audits, and the cut's marker and the report's
	// note (lighthouseAudit), must fit too.
	var tail string
	if n := len(r.RunWarnings); n > 0 {
		tail += fmt.Sprintf("Lighthouse warned: %s\n", clipTo(oneLine(r.RunWarnings[0]), 300))
	}
	if mode == "navigation" {
		tail += "The page was reloaded: take a new snapshot before using refs.\n"
	}
	budget := LighthouseChars - lighthouseNotes - len(tail)
	cat := ""
	for i, f := range failed {
		var e strings.Builder
		if f.Category != cat {
			cat = f.Category
			fmt.Fprintf(&e, "%s:\n", r.Categories[cat].Title)
		}
		fmt.Fprintf(&e, "- %s: %s", f.ID, clipTo(oneLine(f.Title), 200))
		if f.Value != "" {
			fmt.Fprintf(&e, " (%s)", clipTo(oneLine(f.Value), 100))
		}
		if f.Score > 0 {
			fmt.Fprintf(&e, " (score %d)", f.Score)
		}
		e.WriteString("\n")
		for _, it := range f.Items {
			fmt.Fprintf(&e, "    %s\n", it)
		}
		if f.More > 0 {
			fmt.Fprintf(&e, "    (… and %d more)\n", f.More)
		}
		if b.Len()+e.Len() > budget {
			fmt.Fprintf(&b, "(… %d more failed audits cut at %d characters: report \"json\" attaches them all.)\n", len(failed)-i, LighthouseChars)
			break
		}
		b.WriteString(e.String())
	}
	b.WriteString(tail)
	return strings.TrimRight(b.String(), "\n"), scores, failed
}

// percent is a Lighthouse score (0-1) in 0-100, or -1 for none.
func percent(s *float64) int {
	if s == nil {
		return -1
	}
	return int(math.Round(*s * 100))
}

func scoreText(score int) string {
	if score < 0 {
		return "n/a"
	}
	return fmt.Sprint(score)
}

// auditItems returns up to n lines for the items an audit's details list
// (the elements it flags: selector and HTML; else a URL or description),
// and how many items there are.
func auditItems(details json.RawMessage, n int) ([]string, int) {
	var d struct {
		Items []map[string]any `json:"items"`
	}
	if len(details) == 0 || json.Unmarshal(details, &d) != nil {
		return nil, 0
	}
	var out []string
	total := 0
	for _, it := range d.Items {
		line := itemLine(it)
		if line == "" {
			continue
		}
		total++
		if len(out) < n {
			out = append(out, line)
		}
	}
	return out, total
}

// itemLine describes one item of an audit's table: its node (selector,
// snippet, explanation's first line) or its first text field.
func itemLine(it map[string]any) string {
	keys := []string{"node"}
	for k := range it {
		keys = append(keys, k)
	}
	for _, k := range keys {
		m, ok := it[k].(map[string]any)
		if !ok || m["type"] != "node" {
			continue
		}
		sel, _ := m["selector"].(string)
		snip, _ := m["snippet"].(string)
		line := clipTo(oneLine(sel), 150)
		if snip != "" {
			line += "  " + clipTo(oneLine(snip), 200)
		}
		if ex := explanation(m["explanation"]); ex != "" {
			line += " — " + ex
		}
		return strings.TrimSpace(line)
	}
	for _, k := range []string{"description", "url", "source", "value"} {
		switch v := it[k].(type) {
		case string:
			if v != "" {
				return clipTo(oneLine(v), 300)
			}
		case map[string]any:
			if s, _ := v["url"].(string); s != "" {
				return clipTo(oneLine(s), 300)
			}
			if s, _ := v["value"].(string); s != "" {
				return clipTo(oneLine(s), 300)
			}
		}
	}
	return ""
}

// explanation returns the first finding of an axe explanation ("Fix any
// of the following:\n  Element has no alt attribute\n  …"), or "".
func explanation(v any) string {
	s, _ := v.(string)
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasSuffix(l, ":") {
			return clipTo(l, 200)
		}
	}
	return ""
}

// oneLine folds whitespace runs (newlines included) into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }
