package browser

import (
	"context"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/target"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/guard"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// compilePolicy compiles a policy from a request; a bad pattern is the
// caller's error.
func compilePolicy(p *browserv1.UrlPolicy) (*urlpolicy.Policy, error) {
	pol, err := urlpolicy.Compile(p)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "url policy: %v", err)
	}
	return pol, nil
}

// prepareGuard sets up the policy state of a session opened with policy p,
// before its browser context exists: it returns the proxy settings the
// context must be created with (its WebSockets go through the guard's
// proxy). A session without an enforced policy gets none of it.
func (s *session) prepareGuard(p *browserv1.UrlPolicy) (params target.CreateBrowserContextParams, err error) {
	pol, err := compilePolicy(p)
	if err != nil {
		return params, err
	}
	s.policy = p
	if !p.GetEnforced() {
		return params, nil
	}
	s.pol = guard.NewContext(pol)
	params.ProxyServer, params.ProxyBypassList, err = s.pol.WebSocketProxy()
	return params, err
}

// applyPolicy puts the policy of a tool request in force when it differs
// from the one in force. A request without a policy changes nothing. The
// caller holds the lock.
func (s *session) applyPolicy(ctx context.Context, p *browserv1.UrlPolicy) error {
	if p == nil || proto.Equal(p, s.policy) {
		return nil
	}
	pol, err := compilePolicy(p)
	if err != nil {
		return err
	}
	switch {
	case s.pol != nil:
		s.pol.SetPolicy(pol)
	case pol != nil:
		// The session was opened without a policy: protect it from now on.
		// Its browser context was created without the WebSocket proxy, so
		// its WebSockets stay unchecked (see package guard).
		c := guard.NewContext(pol)
		if err := s.guard.Protect(ctx, s.bcid, c); err != nil {
			return bus.Errorf(commonv1.ErrorCode_INTERNAL, "put the url policy in force: %v", err)
		}
		s.pol = c
	}
	s.policy = p
	return nil
}

// navBlocked returns the FORBIDDEN error for a main-frame navigation of
// tab id that the policy blocked after the mark before, or nil.
func (s *session) navBlocked(id target.ID, before guard.NavBlock) error {
	if s.pol == nil {
		return nil
	}
	nb := s.pol.LastNav(id)
	if nb.Seq == before.Seq || nb.Request == nil {
		return nil
	}
	return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s is blocked by %s", nb.Request.GetUrl(), nb.Request.GetRule())
}

// navMark is the mark for navBlocked.
func (s *session) navMark(id target.ID) guard.NavBlock {
	if s.pol == nil {
		return guard.NavBlock{}
	}
	return s.pol.LastNav(id)
}

// policyTools are the session's tools on its URL policy.
var policyTools = map[string]sessionTool{
	"blocked_requests": {run: func(s *session, _ context.Context, _ *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.blockedRequests()
	}},
}

type blockedJSON struct {
	URL          string `json:"url"`
	ResourceType string `json:"resource_type"`
	Rule         string `json:"rule"`
	TimeMs       int64  `json:"time_ms"`
}

// blockedRequests is the blocked_requests tool: the requests the policy
// refused, newest last.
func (s *session) blockedRequests() (*browserv1.ToolResult, error) {
	var list []*browserv1.BlockedRequest
	if s.pol != nil {
		list = s.pol.Blocked()
	}
	out := make([]blockedJSON, 0, len(list))
	if len(list) == 0 {
		msg := "no requests were blocked"
		if s.pol == nil {
			msg += " (this session has no URL policy)"
		}
		return result(msg, map[string]any{"blocked": out})
	}
	var b strings.Builder
	noun := "requests"
	if len(list) == 1 {
		noun = "request"
	}
	fmt.Fprintf(&b, "%d blocked %s", len(list), noun)
	if len(list) == guard.RingSize {
		fmt.Fprintf(&b, " (the last %d are kept)", guard.RingSize)
	}
	b.WriteString(", oldest first:")
	for _, r := range list {
		fmt.Fprintf(&b, "\n%s %s — %s", r.GetResourceType(), r.GetUrl(), r.GetRule())
		out = append(out, blockedJSON{URL: r.GetUrl(), ResourceType: r.GetResourceType(), Rule: r.GetRule(), TimeMs: r.GetTimeMs()})
	}
	return result(b.String(), map[string]any{"blocked": out})
}

// closeGuard stops protecting the session's browser context.
func (s *session) closeGuard() {
	if s.pol == nil {
		return
	}
	if s.guard != nil && s.bcid != "" {
		s.guard.Unprotect(s.bcid)
	}
	s.pol.Close()
}
