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
// Which opens use it: those without a base profile (a profile session has
// a Chromium of its own) whose URL policy is of the pool's kind. A warm
// context is made either under the guard (an enforced policy: the gateway
// has URL rules or blocks private addresses) or without it (nothing to
// enforce: the session must intercept nothing, at no cost per request),
// and the two cannot turn into each other (the WebSocket proxy is fixed
// when the browser context is created). The pool makes the kind the last
// open asked for: a deployment's opens are all of one kind unless some
// tokens carry URL rules and others do not; when the kind changes, the
// contexts of the old kind are closed and the pool refills with the new
// one, and an open of the other kind meanwhile starts cold.

import (
	"context"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// warmPolicy is the policy a warm context is made under, until an open
// puts its own in force: allowing everything, enforced or not (when
// enforced, the guard watches the context and its WebSockets go through
// the guard's proxy).
func warmPolicy(enforced bool) *browserv1.UrlPolicy {
	return &browserv1.UrlPolicy{Enforced: enforced}
}

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

// takeWarmLocked returns a ready warm context of the current Chromium for
// an open of req, or nil, and the contexts it dropped (dead, or of the
// kind the pool no longer makes), for the caller to close once it
// released w.mu.
func (w *Worker) takeWarmLocked(req *browserv1.OpenSessionRequest) (s *session, dead []*session) {
	if req.GetProfile() != "" {
		return nil, nil
	}
	defer w.kickWarm()
	if enforced := req.GetPolicy().GetEnforced(); enforced != w.warmEnforced {
		w.warmEnforced = enforced
		return nil, w.drainWarmLocked()
	}
	for len(w.warm) > 0 {
		s := w.warm[0]
		w.warm = w.warm[1:]
		if s.browser == w.browser && s.browser.Err() == nil && len(s.tabs) == 1 && !s.tabs[0].page.Closed() {
			w.warmTaken++
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
		b, g, enforced := w.browser, w.guard, w.warmEnforced
		w.mu.Unlock()
		if need == 0 {
			return
		}
		s := newSession("", "", b, g)
		s.bus, s.log = w.c, w.log
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.start(sctx, w.pageOptions(), warmPolicy(enforced))
		cancel()
		if err != nil {
			s.closeTabs()
			if ctx.Err() == nil {
				w.log.Warn("warm a browser context", "err", err)
			}
			return // the ticker retries
		}
		w.mu.Lock()
		if w.browser == b && w.warmEnforced == enforced && w.warmNeedLocked() > 0 {
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

// WarmTaken reports how many opens took a warm context (for tests and
// metrics).
func (w *Worker) WarmTaken() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.warmTaken
}
