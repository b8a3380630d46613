package guard

import (
	"sync"
	"sync/atomic"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// RingSize is how many blocked requests a Context keeps.
const RingSize = 200

// Context is the policy state of one protected browser context (one
// browser session): the policy in force and what it blocked. It is safe
// for concurrent use.
type Context struct {
	bcid   cdp.BrowserContextID
	policy atomic.Pointer[urlpolicy.Policy]

	mu     sync.Mutex
	ring   []*browserv1.BlockedRequest // oldest first, at most RingSize
	navs   map[target.ID]NavBlock
	navSeq uint64
	proxy  *socksProxy
}

// NavBlock is the last blocked main-frame navigation of a tab.
type NavBlock struct {
	// Seq grows with every blocked main-frame navigation of the context.
	Seq     uint64
	Request *browserv1.BlockedRequest
}

// NewContext returns the state for a browser context under p (nil: allow
// everything).
func NewContext(p *urlpolicy.Policy) *Context {
	c := &Context{navs: make(map[target.ID]NavBlock)}
	c.policy.Store(p)
	return c
}

// Policy returns the policy in force.
func (c *Context) Policy() *urlpolicy.Policy { return c.policy.Load() }

// SetPolicy puts p in force from the next request on.
func (c *Context) SetPolicy(p *urlpolicy.Policy) { c.policy.Store(p) }

// record adds a blocked request; a main-frame document request (a
// navigation of the tab, or a redirect hop of one) is also remembered per
// tab.
func (c *Context) record(t target.ID, frame cdp.FrameID, br *browserv1.BlockedRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ring) >= RingSize {
		copy(c.ring, c.ring[1:])
		c.ring = c.ring[:RingSize-1]
	}
	c.ring = append(c.ring, br)
	if br.GetResourceType() == "Document" && string(frame) == string(t) {
		c.navSeq++
		c.navs[t] = NavBlock{Seq: c.navSeq, Request: br}
	}
}

// Blocked returns the blocked requests, oldest first.
func (c *Context) Blocked() []*browserv1.BlockedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*browserv1.BlockedRequest(nil), c.ring...)
}

// LastNav returns the last blocked main-frame navigation of the tab t
// (zero when there was none).
func (c *Context) LastNav(t target.ID) NavBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.navs[t]
}
