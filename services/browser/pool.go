package browser

// Warm starts: the worker keeps a few browser contexts of its shared
// Chromium ready (created, under the URL policy guard with an
// allow-everything policy and the WebSocket proxy, one tab with
// about:blank loaded and its renderer running), so that opening a session
// takes one and only puts the caller's policy in force (no Chromium round
// trips but the guard's). A goroutine owned by Run refills the pool in the
// background after each take, after a session closes, and every second.
//
// Capacity: a warm context is a session slot made ready early. Open
// sessions plus warm contexts never exceed Config.MaxSessions, so a worker
// with every slot open has no pool, and the pool never takes a slot from a
// session (an open on a worker with no warm context starts a cold one).
//
// Which opens use it: those with an enforced URL policy (every open from a
// gateway) and no base profile. A session opened without an enforced
// policy (a worker driven without a gateway) must intercept nothing, and
// a profile session has a Chromium of its own: both start cold.

import (
	"context"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// warmPolicy is the policy a warm context is made under: enforced (the
// guard watches it and its WebSockets go through the guard's proxy) and
// allowing everything, until an open puts its own policy in force.
var warmPolicy = &browserv1.UrlPolicy{Enforced: true}

// warmRefillEvery is the refill loop's backstop tick.
const warmRefillEvery = time.Second

// warmSize is the pool size Config asks for (see Config.WarmSessions).
func (cfg Config) warmSize() int {
	switch {
	case cfg.WarmSessions < 0:
		return 0
	case cfg.WarmSessions > 0:
		return min(cfg.WarmSessions, cfg.MaxSessions)
	default:
		return min(2, cfg.MaxSessions)
	}
}

// warmEligible reports whether an open of req may take a warm context.
func warmEligible(req *browserv1.OpenSessionRequest) bool {
	return req.GetProfile() == "" && req.GetPolicy().GetEnforced()
}

// takeWarmLocked returns a ready warm context of the current Chromium, or
// nil, and the dead ones it dropped, for the caller to close once it
// released w.mu.
func (w *Worker) takeWarmLocked() (s *session, dead []*session) {
	defer w.kickWarm()
	for len(w.warm) > 0 {
		s := w.warm[0]
		w.warm = w.warm[1:]
		if s.browser == w.browser && s.browser.Err() == nil && len(s.tabs) == 1 && !s.tabs[0].page.Closed() {
			return s, dead
		}
		dead = append(dead, s)
	}
	return nil, dead
}

// kickWarm asks the refill loop to look at the pool now.
func (w *Worker) kickWarm() {
	select {
	case w.warmKick <- struct{}{}:
	default:
	}
}

// warmNeedLocked is how many warm contexts the pool lacks.
func (w *Worker) warmNeedLocked() int {
	if w.browser == nil || w.browser.Err() != nil || w.stoppingLocked() {
		return 0
	}
	return max(0, min(w.cfg.warmSize(), w.cfg.MaxSessions-len(w.sessions))-len(w.warm))
}

// warmLoop keeps the pool filled until ctx ends; Run owns it.
func (w *Worker) warmLoop(ctx context.Context) {
	if w.cfg.warmSize() == 0 {
		return
	}
	t := time.NewTicker(warmRefillEvery)
	defer t.Stop()
	for {
		w.refillWarm(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.warmKick:
		}
	}
}

// refillWarm makes warm contexts, one at a time, until the pool is full.
func (w *Worker) refillWarm(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		need := w.warmNeedLocked()
		b, g := w.browser, w.guard
		w.mu.Unlock()
		if need == 0 {
			return
		}
		s := newSession("", "", b, g)
		s.bus, s.log = w.c, w.log
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.start(sctx, w.pageOptions(), warmPolicy)
		cancel()
		if err != nil {
			s.closeTabs()
			if ctx.Err() == nil {
				w.log.Warn("warm a browser context", "err", err)
			}
			return // the ticker retries
		}
		w.mu.Lock()
		if w.browser == b && w.warmNeedLocked() > 0 {
			w.warm = append(w.warm, s)
			s = nil
		}
		w.mu.Unlock()
		if s != nil {
			s.closeTabs()
		}
	}
}

// trimWarmLocked takes out the warm contexts beyond the slots the open
// sessions leave (a cold open took one), for the caller to close once it
// released w.mu.
func (w *Worker) trimWarmLocked() (extra []*session) {
	for len(w.warm) > 0 && len(w.sessions)+len(w.warm) > w.cfg.MaxSessions {
		extra = append(extra, w.warm[len(w.warm)-1])
		w.warm = w.warm[:len(w.warm)-1]
	}
	return extra
}

// drainWarmLocked empties the pool and returns what it held, to close.
func (w *Worker) drainWarmLocked() []*session {
	all := w.warm
	w.warm = nil
	return all
}

// WarmSessions reports how many warm browser contexts the worker holds
// ready (for tests and metrics).
func (w *Worker) WarmSessions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.warm)
}
