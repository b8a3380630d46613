package browser

import (
	"context"
	"fmt"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// emulateTools are resize and emulate, for the whole session.
var emulateTools = map[string]sessionTool{
	"resize": {run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.emulate(ctx, r, page.Resizing(r.GetResize()))
	}},
	"emulate": {run: func(s *session, ctx context.Context, r *browserv1.ToolRequest, _ page.Options) (*browserv1.ToolResult, error) {
		return s.emulate(ctx, r, page.Emulating(r.GetEmulate()))
	}},
}

// emulate is the resize and emulate tools. Emulation belongs to the
// session, not to one tab: the active tab runs the tool (it settles and
// reports what changed), then every other tab gets the same emulation, and
// so do the tabs opened later (newTab), so that a page the session opens
// in a new tab looks the same as the one it came from. The caller holds
// the lock.
func (s *session) emulate(ctx context.Context, req *browserv1.ToolRequest, change page.EmulationChange) (*browserv1.ToolResult, error) {
	next, err := change(s.emu)
	if err != nil {
		return nil, err
	}
	if next.Geolocation != nil && s.emu.Geolocation == nil {
		if err := s.grantGeolocation(ctx); err != nil {
			return nil, err
		}
	}
	// The active tab first: a value Chromium refuses (a time zone it does
	// not know) leaves the session as it was.
	res, err := s.tabs[s.active].page.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	s.emu = next
	for i, t := range s.tabs {
		if i == s.active {
			continue
		}
		if err := t.page.Emulate(ctx, next); err != nil {
			return nil, fmt.Errorf("emulate in tab %d: %w", i, err)
		}
	}
	page.AppendText(res, "- every tab of this session has it, and so will new ones (tab_list shows it)")
	page.SetStructured(res, "emulation", next.Shown())
	return res, nil
}

// grantGeolocation lets the session's pages read the (emulated)
// position: pages ask before they read it, and nobody is there to answer.
func (s *session) grantGeolocation(ctx context.Context) error {
	bctx, cancel := within(s.browser, ctx)
	defer cancel()
	_, err := chromedp.CallBrowser(bctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "geolocation"}, Setting: cdpbrowser.PermissionSettingGranted, BrowserContextID: s.bcid})
	if err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "grant the geolocation permission: %v", err)
	}
	return nil
}

// setEmulation makes e the session's emulation in every tab it has now
// (a restore: one blank tab); newTab applies it to the tabs that follow.
func (s *session) setEmulation(ctx context.Context, e page.Emulation) error {
	for _, t := range s.tabs {
		if err := t.page.Emulate(ctx, e); err != nil {
			return err
		}
	}
	if e.Geolocation != nil {
		if err := s.grantGeolocation(ctx); err != nil {
			return err
		}
	}
	s.emu = e
	return nil
}

// emulateNew applies the session's emulation to a tab it just opened.
func (s *session) emulateNew(ctx context.Context, t *tab) error {
	if s.emu.IsZero() {
		return nil
	}
	return t.page.Emulate(ctx, s.emu)
}

// blockedList is what the session's URL policy refused, for
// network_requests (page.Tab.SetBlocked); it runs under the session lock,
// within a tool call.
func (s *session) blockedList() []*browserv1.BlockedRequest {
	if s.pol == nil {
		return nil
	}
	return s.pol.Blocked()
}
