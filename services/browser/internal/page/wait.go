package page

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

const (
	// defaultWait is how long wait waits when ms is 0.
	defaultWait = time.Second
	// maxWait is the longest wait.
	maxWait = 60 * time.Second
	// defaultWaitFor is how long wait_for waits when timeout_ms is 0.
	defaultWaitFor = 10 * time.Second
	// pollEvery is how often wait_for looks for its selector.
	pollEvery = 50 * time.Millisecond
)

// wait sleeps ms milliseconds (default 1000), at most a minute and never
// past the request deadline.
func wait(ctx context.Context, ms int32) (*browserv1.ToolResult, error) {
	if ms < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait needs ms >= 0 (milliseconds to wait), not %d", ms)
	}
	d := defaultWait
	if ms > 0 {
		d = time.Duration(ms) * time.Millisecond
	}
	note := ""
	if d > maxWait {
		d, note = maxWait, " (the longest wait is 60000 ms)"
	}
	if soft := time.Until(softDeadline(ctx, 0)); d > soft {
		d, note = max(soft, 0), " (cut short by the request deadline)"
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return textResult("Waited %d ms%s", d.Milliseconds(), note), nil
}

// found is what page.js's find says about a selector.
type found struct {
	Visible bool   `json:"visible"`
	Desc    string `json:"desc"`
}

// waitFor waits until its one condition holds (see waitCondition), for
// timeout_ms (default 10000) and never past the request deadline. It keeps
// looking across navigations.
func (t *Tab) waitFor(ctx context.Context, w *browserv1.WaitFor) (*browserv1.ToolResult, error) {
	if w.GetTimeoutMs() < 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for needs timeout_ms >= 0, not %d", w.GetTimeoutMs())
	}
	cond, err := t.waitCondition(w)
	if err != nil {
		return nil, err
	}
	limit := defaultWaitFor
	if w.GetTimeoutMs() > 0 {
		limit = time.Duration(w.GetTimeoutMs()) * time.Millisecond
	}
	start := time.Now()
	deadline := softDeadline(ctx, limit)
	for {
		done, msg, err := cond.check(ctx)
		if err != nil {
			return nil, err
		}
		if done {
			return textResult("%s (after %d ms)", msg, time.Since(start).Milliseconds()), nil
		}
		wait := min(pollEvery, time.Until(deadline))
		if wait <= 0 {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	waited := time.Since(start).Milliseconds()
	why := "the timeout"
	if limit > time.Since(start)+pollEvery {
		why = "the request deadline"
	}
	return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "wait_for: %s within %d ms (%s)%s", cond.notYet(), waited, why, cond.hint)
}

// waitCond is one condition of wait_for: check looks once and says
// whether it holds and what to answer; notYet says what did not happen.
type waitCond struct {
	check  func(ctx context.Context) (bool, string, error)
	notYet func() string
	hint   string
}

// waitCondition returns the one condition of w: an element matching a CSS
// selector is visible, a text is visible on the page or gone from it
// (case-insensitive, the main frame's innerText), or the page's address
// contains a text or matches a glob.
func (t *Tab) waitCondition(w *browserv1.WaitFor) (*waitCond, error) {
	sel, text, gone, url := strings.TrimSpace(w.GetSelector()), w.GetText(), w.GetTextGone(), strings.TrimSpace(w.GetUrl())
	n := 0
	for _, s := range []string{sel, strings.TrimSpace(text), strings.TrimSpace(gone), url} {
		if s != "" {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for needs one condition: selector (CSS, such as #results), text, text_gone or url")
	case n > 1:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for takes exactly one condition (selector, text, text_gone or url), not %d; call it once per condition", n)
	case len(text) > maxWaitText || len(gone) > maxWaitText:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for: the text may be at most %d bytes (maxWaitText)", maxWaitText)
	case sel != "":
		return t.selectorCond(sel), nil
	case url != "":
		return t.urlCond(url)
	case strings.TrimSpace(text) != "":
		return t.textCond(text, true), nil
	}
	return t.textCond(gone, false), nil
}

// maxWaitText is the longest text wait_for looks for.
const maxWaitText = 1000

func (t *Tab) selectorCond(selector string) *waitCond {
	var last *found
	return &waitCond{
		check: func(ctx context.Context) (bool, string, error) {
			f, err := t.find(ctx, selector)
			if err != nil || f == nil {
				return false, "", err
			}
			last = f
			return f.Visible, fmt.Sprintf("Found %s: %s", selector, t.frames.noteDesc(f.Desc)), nil
		},
		notYet: func() string {
			if last != nil {
				return fmt.Sprintf("%q matches an element, but it stayed hidden", selector)
			}
			return fmt.Sprintf("no element matched %q", selector)
		},
		hint: "; check the selector or take a snapshot",
	}
}

// textCond waits for text to be visible in the main frame (want) or to be
// gone from it.
func (t *Tab) textCond(text string, want bool) *waitCond {
	quoted := strconv.Quote(clipTo(text, 200))
	return &waitCond{
		check: func(ctx context.Context) (bool, string, error) {
			has, err := jsHasText(ctx, t, strings.ToLower(strings.TrimSpace(text)))
			if err != nil {
				if ctx.Err() != nil {
					return false, "", err
				}
				return false, "", nil // the page is navigating; look again
			}
			if want {
				return has, "Found the text " + quoted, nil
			}
			return !has, "The text " + quoted + " is gone", nil
		},
		notYet: func() string {
			if want {
				return "the text " + quoted + " did not show up"
			}
			return "the text " + quoted + " stayed on the page"
		},
		hint: "; take a snapshot or get_text to see what the page shows",
	}
}

// urlCond waits for the page's address to contain pattern, or to match it
// as a glob when it has a * (* stays within a path segment, ** does not; ?
// matches one character). A pattern with ? but no * is a part of a URL
// too (a query: /r?page=2), so either way of matching will do.
func (t *Tab) urlCond(pattern string) (*waitCond, error) {
	match := func(u string) bool { return strings.Contains(u, pattern) }
	if strings.ContainsAny(pattern, "*?") {
		re, err := globRegexp(pattern)
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "wait_for: url glob %q is not valid: %v", pattern, err)
		}
		if strings.Contains(pattern, "*") {
			match = re.MatchString
		} else {
			match = func(u string) bool { return strings.Contains(u, pattern) || re.MatchString(u) }
		}
	}
	var last string
	return &waitCond{
		check: func(ctx context.Context) (bool, string, error) {
			u, err := t.currentURL(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return false, "", err
				}
				return false, "", nil
			}
			last = u
			return match(u), "The URL is " + clipTo(u, maxURL), nil
		},
		notYet: func() string {
			return fmt.Sprintf("the URL did not match %q (it is %s)", pattern, clipTo(last, maxURL))
		},
	}, nil
}

// globRegexp turns a URL glob into an anchored regular expression: **
// matches anything, * anything but a slash, ? one character.
func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch {
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case glob[i] == '*':
			b.WriteString("[^/]*")
		case glob[i] == '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// find looks once for selector in the main frame. A page between two
// documents counts as not found; a bad selector is an error.
func (t *Tab) find(ctx context.Context, selector string) (*found, error) {
	f, err := jsFind(ctx, t, selector)
	if je, ok := asJSError(err); ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "selector %q is not valid CSS: %s", selector, firstLines(je.Error(), 1))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, nil // the page is navigating; look again
	}
	return f, nil
}
