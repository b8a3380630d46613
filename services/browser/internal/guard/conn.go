package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// mux is the worker's connection to Chromium, shared by chromedp and the
// guard. chromedp routes only the sessions that it attached itself and
// drops the messages of any other, so the guard reads its own sessions'
// messages here before chromedp sees them, and writes its commands here.
type mux struct {
	chromedp.Transport
	g *Guard
}

// Read passes chromedp the next message that is not the guard's.
func (m *mux) Read(ctx context.Context, msg *cdproto.Message) error {
	for {
		if err := m.Transport.Read(ctx, msg); err != nil {
			return err
		}
		if msg.SessionID != "" {
			if s := m.g.session(msg.SessionID); s != nil {
				s.receive(msg)
				*msg = cdproto.Message{}
				continue
			}
			return nil
		}
		switch msg.Method {
		case "Target.attachedToTarget":
			// Claimed here, before the next read, so that no message of the
			// new session reaches chromedp.
			var ev target.EventAttachedToTarget
			if err := json.Unmarshal(msg.Params, &ev); err == nil && ev.WaitingForDebugger && ev.TargetInfo != nil {
				s := m.g.claimAuto(ev.SessionID, ev.TargetInfo, nil)
				go m.g.adopt(s, ev.TargetInfo)
			}
		case "Target.detachedFromTarget":
			var ev target.EventDetachedFromTarget
			if err := json.Unmarshal(msg.Params, &ev); err == nil {
				m.g.drop(ev.SessionID)
			}
		}
		return nil
	}
}

// session is the guard's own flat CDP session to one target.
type session struct {
	id     target.SessionID
	target target.ID
	g      *Guard
	ctx    *Context // nil: not protected (only released and detached)
	parent *session // the session that auto-attached this one (an out-of-process iframe's page); nil: the browser

	mu      sync.Mutex
	hook    *Target // non-nil while the target's browser context is hooked (hooks.go)
	pending map[int64]chan *cdproto.Message
	gone    chan struct{}
	closed  bool
}

// hooked returns the session's target as the hooks see it, or nil.
func (s *session) hooked() *Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hook
}

var errDetached = errors.New("the target went away")

// call sends a command on the session and waits for its reply.
func (s *session) call(ctx context.Context, method string, params, res any) error {
	var buf []byte
	if params != nil {
		var err error
		if buf, err = json.Marshal(params); err != nil {
			return err
		}
	}
	id := s.g.next.Add(1)
	ch := make(chan *cdproto.Message, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errDetached
	}
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	msg := &cdproto.Message{ID: id, SessionID: s.id, Method: cdproto.MethodType(method), Params: buf}
	if err := s.g.mux.Transport.Write(ctx, msg); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %w", method, r.Error)
		}
		if res != nil && len(r.Result) > 0 {
			return json.Unmarshal(r.Result, res)
		}
		return nil
	case <-s.gone:
		return errDetached
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receive handles a message of the session; it runs on the connection's
// reader and never blocks.
func (s *session) receive(msg *cdproto.Message) {
	if msg.ID != 0 {
		s.mu.Lock()
		ch := s.pending[msg.ID]
		s.mu.Unlock()
		if ch != nil {
			m := *msg
			select {
			case ch <- &m:
			default:
			}
		}
		return
	}
	switch string(msg.Method) {
	case fetch.RequestPaused.Method:
		if s.ctx != nil {
			var ev fetch.EventRequestPaused
			if err := json.Unmarshal(msg.Params, &ev); err == nil {
				go s.g.decide(s, &ev)
			}
		}
		return
	case "Target.attachedToTarget":
		// An out-of-process iframe of a hooked page (hooks.go): claimed
		// here, before the next read, like the browser's own.
		var ev target.EventAttachedToTarget
		if err := json.Unmarshal(msg.Params, &ev); err == nil && ev.TargetInfo != nil {
			c := s.g.claimAuto(ev.SessionID, ev.TargetInfo, s)
			go s.g.adopt(c, ev.TargetInfo)
		}
		return
	case "Target.detachedFromTarget":
		var ev target.EventDetachedFromTarget
		if err := json.Unmarshal(msg.Params, &ev); err == nil {
			s.g.drop(ev.SessionID)
		}
		return
	}
	if t := s.hooked(); t != nil {
		t.hooks.Event(t, string(msg.Method), msg.Params)
	}
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.gone)
	}
}
