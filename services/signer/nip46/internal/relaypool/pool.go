// Package relaypool keeps websocket connections to a set of Nostr
// relays, with one subscription on each, and reconnects (with backoff
// and a fresh subscription) when a connection drops. It is shared by the
// NIP-46 client and the test bunker.
package relaypool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// MaxMessage is the largest relay message read (1 MiB); relays commonly
// cap events well below that.
const MaxMessage = 1 << 20

// eoseWait is how long a relay that does not answer a subscription with
// EOSE is waited for before it is taken as up anyway.
const eoseWait = 3 * time.Second

// writeTimeout bounds one websocket write.
const writeTimeout = 10 * time.Second

// ErrNoRelay is returned by Publish when no relay is connected.
var ErrNoRelay = errors.New("no relay connected")

// Config configures a Pool.
type Config struct {
	// URLs are the relays (ws:// or wss://).
	URLs []string
	// Filter returns the subscription filter; it is called at each
	// (re)subscription, so that "since" can move.
	Filter func() Filter
	// OnEvent receives each event of the subscription, once its id and
	// signature are verified and it matches the filter. It is called from
	// the relays' reader goroutines, concurrently across relays, and
	// should not block long. An event sent by several relays is delivered
	// once per relay.
	OnEvent func(relay string, ev *nostr.Event)
	// Resend, if set, returns events to publish on a relay that has just
	// (re)subscribed: requests that may have been lost while it was down.
	Resend func() []*nostr.Event
	// OnChange, if set, is called after a relay's state changes.
	OnChange func()
	// Logger gets connection events (never event contents); nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts (defaults 250ms and 30s); the wait doubles after each
	// failure, with jitter, and starts again at MinBackoff after a
	// connection that worked.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt (default 10s).
	DialTimeout time.Duration
	// PingInterval is how often a websocket ping checks that a
	// connection is alive (default 30s); a ping unanswered within the
	// interval drops the connection, which is then reconnected.
	PingInterval time.Duration
}

// State is the state of one relay connection.
type State string

// Relay connection states.
const (
	StateDialing State = "dialing" // connecting (first time or again)
	StateUp      State = "up"      // connected, subscription answered
	StateDown    State = "down"    // last attempt failed; waiting to retry
)

// RelayStatus describes one relay connection.
type RelayStatus struct {
	URL   string
	State State
	// Failures counts failed attempts (or dropped connections) since the
	// relay was last up.
	Failures int
	// Err is the last failure, when the relay is not up.
	Err string
}

type relay struct {
	url string
	// Guarded by Pool.mu.
	conn     *websocket.Conn
	state    State
	failures int
	lastErr  string
}

// Pool is a set of relay connections. Its methods are safe for
// concurrent use.
type Pool struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	relays  []*relay
	changed chan struct{} // closed and replaced at each state change
}

// New starts connecting to every relay of cfg.URLs in the background.
func New(cfg Config) *Pool {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 250 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.Filter == nil {
		cfg.Filter = func() Filter { return Filter{} }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: log, ctx: ctx, cancel: cancel, changed: make(chan struct{})}
	for _, u := range cfg.URLs {
		r := &relay{url: u, state: StateDialing}
		p.relays = append(p.relays, r)
	}
	for _, r := range p.relays {
		p.wg.Add(1)
		go p.run(r)
	}
	return p
}

// Close drops every connection and waits for the pool's goroutines to
// end. OnEvent is not called after Close returns. Close is idempotent.
func (p *Pool) Close() {
	p.cancel()
	p.wg.Wait()
}

// Status returns the state of each relay, in the order of Config.URLs.
func (p *Pool) Status() []RelayStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RelayStatus, len(p.relays))
	for i, r := range p.relays {
		out[i] = RelayStatus{URL: r.url, State: r.state, Failures: r.failures, Err: r.lastErr}
	}
	return out
}

// Up reports how many relays are connected and subscribed.
func (p *Pool) Up() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.relays {
		if r.state == StateUp {
			n++
		}
	}
	return n
}

// WaitUp waits until at least one relay is connected and subscribed. If
// failFast is set it gives up as soon as every relay has failed at least
// once without any being up, with an error naming each failure;
// otherwise it waits until ctx ends.
func (p *Pool) WaitUp(ctx context.Context, failFast bool) error {
	for {
		p.mu.Lock()
		changed := p.changed
		allFailed := len(p.relays) > 0
		var errs []string
		for _, r := range p.relays {
			if r.state == StateUp {
				p.mu.Unlock()
				return nil
			}
			if r.failures == 0 {
				allFailed = false
			} else {
				errs = append(errs, r.url+": "+r.lastErr)
			}
		}
		p.mu.Unlock()
		if failFast && allFailed {
			return fmt.Errorf("%w: %s", ErrNoRelay, strings.Join(errs, "; "))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if len(errs) > 0 {
				return fmt.Errorf("%w (%s): %w", ErrNoRelay, strings.Join(errs, "; "), ctx.Err())
			}
			return fmt.Errorf("%w: %w", ErrNoRelay, ctx.Err())
		case <-p.ctx.Done():
			return fmt.Errorf("%w: the relay pool is closed", ErrNoRelay)
		}
	}
}

// Publish sends ev to every connected relay, in parallel, and returns
// how many took it (a relay "takes" an event when the websocket write
// succeeds; its OK answer is only logged). It returns ErrNoRelay if none
// did.
func (p *Pool) Publish(ctx context.Context, ev *nostr.Event) (int, error) {
	msg, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		return 0, fmt.Errorf("encode event: %w", err)
	}
	type target struct {
		url  string
		conn *websocket.Conn
	}
	var targets []target
	p.mu.Lock()
	for _, r := range p.relays {
		if r.state == StateUp && r.conn != nil {
			targets = append(targets, target{r.url, r.conn})
		}
	}
	p.mu.Unlock()
	if len(targets) == 0 {
		return 0, ErrNoRelay
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		n    int
		errs []string
	)
	for _, t := range targets {
		wg.Go(func() {
			err := write(ctx, t.conn, msg)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, t.url+": "+err.Error())
				return
			}
			n++
		})
	}
	wg.Wait()
	if n == 0 {
		return 0, fmt.Errorf("%w: %s", ErrNoRelay, strings.Join(errs, "; "))
	}
	return n, nil
}

func write(ctx context.Context, c *websocket.Conn, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, msg)
}

// notify wakes WaitUp callers and calls OnChange. Call with p.mu held;
// OnChange runs after the unlock, from the caller's goroutine.
func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pool) setState(r *relay, st State, conn *websocket.Conn, err error) {
	p.mu.Lock()
	r.state = st
	r.conn = conn
	switch {
	case st == StateUp:
		r.failures = 0
		r.lastErr = ""
	case err != nil:
		r.failures++
		r.lastErr = err.Error()
	}
	p.notifyLocked()
	p.mu.Unlock()
	if p.cfg.OnChange != nil {
		p.cfg.OnChange()
	}
}

// run keeps one relay connected until the pool closes.
func (p *Pool) run(r *relay) {
	defer p.wg.Done()
	backoff := p.cfg.MinBackoff
	for {
		wasUp, err := p.session(r)
		if p.ctx.Err() != nil {
			p.setState(r, StateDown, nil, errors.New("closed"))
			return
		}
		if err == nil {
			err = errors.New("connection closed")
		}
		p.setState(r, StateDown, nil, err)
		p.log.Warn("nip46: relay connection lost", "relay", r.url, "error", err.Error())
		if wasUp {
			backoff = p.cfg.MinBackoff
		}
		wait := backoff/2 + mrand.N(backoff/2+1)
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			p.setState(r, StateDown, nil, errors.New("closed"))
			return
		}
		backoff = min(backoff*2, p.cfg.MaxBackoff)
		p.setState(r, StateDialing, nil, nil)
	}
}

// session connects, subscribes and reads until the connection fails or
// the pool closes. wasUp says whether the relay answered the
// subscription (so that the next attempt starts again at MinBackoff).
func (p *Pool) session(r *relay) (wasUp bool, err error) {
	dctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	c, _, err := websocket.Dial(dctx, r.url, nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(MaxMessage)
	// Closing the pool closes the connection, which ends Read below.
	stop := context.AfterFunc(p.ctx, func() { _ = c.CloseNow() })
	defer stop()

	filter := p.cfg.Filter()
	subID := randomID()
	req, err := json.Marshal([]any{"REQ", subID, filter})
	if err != nil {
		return false, fmt.Errorf("encode subscription: %w", err)
	}
	if err := write(p.ctx, c, req); err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	// Keepalive: a connection that stops answering pings (a dead NAT
	// mapping, a frozen relay) is dropped and reconnected.
	stopPing := p.keepalive(c)
	defer func() {
		_ = c.CloseNow() // first, so that a ping in progress ends
		stopPing()
	}()

	// The relay is up once it has answered the subscription (EOSE, or an
	// event of it): from then on, events sent to it reach us. A relay
	// that never says EOSE is taken as up after eoseWait.
	var (
		upOnce sync.Once
		upMu   sync.Mutex
		ended  bool
		wentUp atomic.Bool
	)
	markUp := func() {
		upOnce.Do(func() {
			upMu.Lock()
			defer upMu.Unlock()
			if ended {
				return
			}
			p.setState(r, StateUp, c, nil)
			wentUp.Store(true)
			p.log.Debug("nip46: relay connected", "relay", r.url)
			if p.cfg.Resend == nil {
				return
			}
			for _, ev := range p.cfg.Resend() {
				if msg, err := json.Marshal([]any{"EVENT", ev}); err == nil {
					_ = write(p.ctx, c, msg) // a broken connection shows in Read
				}
			}
		})
	}
	eoseTimer := time.AfterFunc(eoseWait, markUp)
	defer func() {
		eoseTimer.Stop()
		upMu.Lock()
		ended = true
		upMu.Unlock()
	}()

	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			_ = c.CloseNow()
			if stopPing() {
				return wentUp.Load(), fmt.Errorf("no answer to a websocket ping within %s", p.cfg.PingInterval)
			}
			return wentUp.Load(), fmt.Errorf("read: %w", err)
		}
		if err := p.handle(r, subID, &filter, data, markUp); err != nil {
			return wentUp.Load(), err
		}
	}
}

// keepalive pings c every PingInterval; a ping left unanswered for an
// interval closes c. The returned stop ends the pinging, waits for it to
// end and reports whether c was closed for want of a pong; it may be
// called more than once.
func (p *Pool) keepalive(c *websocket.Conn) (stop func() (timedOut bool)) {
	done := make(chan struct{})
	var (
		once     sync.Once
		wg       sync.WaitGroup
		timedOut bool
	)
	wg.Go(func() {
		t := time.NewTicker(p.cfg.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(p.ctx, p.cfg.PingInterval)
			err := c.Ping(ctx)
			cancel()
			if err != nil {
				timedOut = errors.Is(err, context.DeadlineExceeded)
				_ = c.CloseNow()
				return
			}
		}
	})
	return func() bool {
		once.Do(func() { close(done) })
		wg.Wait()
		return timedOut
	}
}

// handle processes one relay message; markUp is called when the relay
// answers the subscription. An error ends the connection.
func (p *Pool) handle(r *relay, subID string, filter *Filter, data []byte, markUp func()) error {
	var msg []json.RawMessage
	if err := json.Unmarshal(data, &msg); err != nil || len(msg) == 0 {
		p.log.Debug("nip46: relay sent a message that is not a JSON array", "relay", r.url)
		return nil
	}
	var label string
	_ = json.Unmarshal(msg[0], &label)
	switch label {
	case "EVENT":
		var sid string
		if len(msg) < 3 || json.Unmarshal(msg[1], &sid) != nil || sid != subID {
			return nil
		}
		markUp()
		var ev nostr.Event
		if err := json.Unmarshal(msg[2], &ev); err != nil {
			p.log.Debug("nip46: relay sent an event that does not decode", "relay", r.url)
			return nil
		}
		if err := nostr.VerifyEvent(&ev); err != nil {
			p.log.Warn("nip46: relay sent an event with a bad id or signature; ignored", "relay", r.url, "error", err.Error())
			return nil
		}
		if !filter.Match(&ev) {
			p.log.Debug("nip46: relay sent an event outside the subscription; ignored", "relay", r.url, "event", ev.ID)
			return nil
		}
		if p.cfg.OnEvent != nil {
			p.cfg.OnEvent(r.url, &ev)
		}
	case "OK":
		var id, reason string
		var ok bool
		if len(msg) >= 4 && json.Unmarshal(msg[1], &id) == nil && json.Unmarshal(msg[2], &ok) == nil {
			_ = json.Unmarshal(msg[3], &reason)
			if !ok {
				p.log.Warn("nip46: relay refused an event", "relay", r.url, "event", id, "reason", clip(reason))
			}
		}
	case "CLOSED":
		var sid, reason string
		if len(msg) >= 2 && json.Unmarshal(msg[1], &sid) == nil && sid == subID {
			if len(msg) >= 3 {
				_ = json.Unmarshal(msg[2], &reason)
			}
			return fmt.Errorf("relay closed the subscription: %s", clip(reason))
		}
	case "NOTICE":
		var notice string
		if len(msg) >= 2 {
			_ = json.Unmarshal(msg[1], &notice)
		}
		p.log.Info("nip46: relay notice", "relay", r.url, "notice", clip(notice))
	case "EOSE":
		var sid string
		if len(msg) >= 2 && json.Unmarshal(msg[1], &sid) == nil && sid == subID {
			markUp() // the subscription stays open for new events
		}
	case "AUTH":
		// NIP-42 is not supported: a relay that requires it will refuse
		// our events, which shows in the log and as timeouts.
	}
	return nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
