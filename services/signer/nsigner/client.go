package nsigner

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Default timeouts and backoff.
const (
	// DefaultTimeout bounds the calls no person approves.
	DefaultTimeout = 5 * time.Second
	// DefaultSlowTimeout bounds sign_event and the decrypts, which a person
	// may approve on the device; the specification asks for at least 60 s.
	DefaultSlowTimeout = 60 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait between
	// reconnection attempts, which doubles after each failure.
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// ErrBadSignature is wrapped by SignEvent's error when the device returned
// an id, pubkey or signature that does not check out; the event is not
// returned.
var ErrBadSignature = errors.New("nsigner returned a signature that does not verify")

// Config says how to reach an nsigner.
type Config struct {
	// Transport is serial, unix, tcp or qrexec.
	Transport string
	// Device is the serial device path, socket path, host:port or qube name.
	Device string
	// Service is the qrexec service (qrexec only); default qubes.NsignerRpc.
	Service string
	// Index is the key index passed as the qrexec service argument
	// (qubes.NsignerRpc+Index), so a dom0 policy can allow one key only.
	Index uint32

	// Timeout bounds hello, ping, list_keys, get_public_key and the
	// encrypts; default 5 s.
	Timeout time.Duration
	// SlowTimeout bounds sign_event, nip44_decrypt and nip04_decrypt;
	// default 60 s (the specification's minimum; lower it only in tests).
	SlowTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnection backoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives link events; event content and plaintext are never
	// logged. Default slog.Default().
	Logger *slog.Logger
}

// LinkState is the state of a Client's link.
type LinkState string

// Link states.
const (
	StateConnected    LinkState = "connected"    // the device answered hello
	StateConnecting   LinkState = "connecting"   // opening the link, or about to after it broke
	StateDisconnected LinkState = "disconnected" // the last attempt failed; retrying with backoff
)

// Status is a Client's link state, for login_status.
type Status struct {
	State     LinkState
	Transport string
	Device    string
	Since     time.Time   // when State last changed
	LastError string      // the last connection or link error; "" if none
	Hello     HelloResult // from the last successful connection
	Dropped   uint64      // lines dropped: unparseable, too long or of an unknown id
}

// Client is the host end of an nsigner link. It keeps one request in flight
// at a time, reconnects with backoff when the link breaks and checks every
// signature before returning it. Its methods are safe for concurrent use;
// calls queue for the link.
type Client struct {
	cfg    Config
	log    *slog.Logger
	slot   chan struct{} // holds a token while a call uses the link
	kickc  chan struct{} // wakes the reconnect loop early
	nextID atomic.Uint64
	drops  atomic.Uint64
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the reconnect loop has ended

	mu       sync.Mutex
	cur      *link // nil while not connected
	state    LinkState
	since    time.Time
	lastErr  error
	hello    HelloResult
	attempts uint64        // connection attempts finished
	changed  chan struct{} // closed and replaced on every change above
	closed   bool
}

// errCallTimeout is the cause of a call's own deadline.
var errCallTimeout = errors.New("nsigner call timed out")

// Dial connects to the nsigner cfg names and checks that it speaks nsigner/1
// (hello). The Client then keeps the link up until Close: when it breaks it
// reconnects in the background, and a call waits for that.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Service == "" {
		cfg.Service = DefaultService
	}
	if err := validTransport(&cfg); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.SlowTimeout <= 0 {
		cfg.SlowTimeout = DefaultSlowTimeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{
		cfg:     cfg,
		log:     log.With("nsigner_transport", cfg.Transport, "nsigner_device", cfg.Device),
		slot:    make(chan struct{}, 1),
		kickc:   make(chan struct{}, 1),
		done:    make(chan struct{}),
		state:   StateConnecting,
		since:   time.Now(),
		changed: make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()

	c.mu.Lock()
	for c.attempts == 0 {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("nsigner: connect to %s %s: %w", cfg.Transport, cfg.Device, ctx.Err())
		}
		c.mu.Lock()
	}
	ok, err := c.cur != nil, c.lastErr
	c.mu.Unlock()
	if !ok {
		c.Close()
		return nil, fmt.Errorf("nsigner: connect to %s %s: %v: %w", cfg.Transport, cfg.Device, err, ErrLinkDown)
	}
	return c, nil
}

// Close ends the link and the reconnection; calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.broadcastLocked()
	c.mu.Unlock()
	c.cancel()
	<-c.done
	return nil
}

// State reports the link state.
func (c *Client) State() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{State: c.state, Transport: c.cfg.Transport, Device: c.cfg.Device, Since: c.since, Hello: c.hello, Dropped: c.drops.Load()}
	if c.lastErr != nil {
		s.LastError = c.lastErr.Error()
	}
	return s
}

// Hello asks the device for its protocol, name and key count.
func (c *Client) Hello(ctx context.Context) (HelloResult, error) {
	var h HelloResult
	err := c.do(ctx, MethodHello, func(l *link) error { return l.roundTrip(ctx, MethodHello, nil, &h) })
	return h, err
}

// Ping checks the device answers.
func (c *Client) Ping(ctx context.Context) error {
	var s string
	err := c.do(ctx, MethodPing, func(l *link) error { return l.roundTrip(ctx, MethodPing, nil, &s) })
	if err == nil && s != "pong" {
		err = fmt.Errorf("nsigner ping: the device answered %q, not \"pong\"", truncate(s, 64))
	}
	return err
}

// ListKeys lists the device's keys.
func (c *Client) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	var keys []KeyInfo
	err := c.do(ctx, MethodListKeys, func(l *link) error { return l.roundTrip(ctx, MethodListKeys, nil, &keys) })
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !isHex(k.PubKey, 32) {
			return nil, fmt.Errorf("nsigner list_keys: key index %d has pubkey %q, not 64 hex digits", k.Index, truncate(k.PubKey, 80))
		}
	}
	return keys, nil
}

// GetPublicKey returns key index's public key, 64 hex digits.
func (c *Client) GetPublicKey(ctx context.Context, index uint32) (string, error) {
	var pk string
	err := c.do(ctx, MethodGetPublicKey, func(l *link) (err error) {
		pk, err = l.pubkey(ctx, index)
		return err
	})
	return pk, err
}

// SignEvent has key index sign ev (its kind, created_at, tags and content;
// its pubkey, when set, must be the key's). It returns a new event with id,
// pubkey and sig set, after recomputing the id and verifying the BIP-340
// signature against the key's public key; a device's bad answer is an error
// wrapping ErrBadSignature and is never returned.
func (c *Client) SignEvent(ctx context.Context, index uint32, ev *nostr.Event) (*nostr.Event, error) {
	if ev == nil {
		return nil, errors.New("nsigner sign_event: no event")
	}
	out := &nostr.Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: copyTags(ev.Tags), Content: ev.Content}
	err := c.do(ctx, MethodSignEvent, func(l *link) error {
		pk, err := l.pubkey(ctx, index)
		if err != nil {
			return err
		}
		if ev.PubKey != "" && ev.PubKey != pk {
			return fmt.Errorf("nsigner sign_event: the event's pubkey %s is not key index %d's (%s)", truncate(ev.PubKey, 80), index, pk)
		}
		var res signResult
		params := signParams{Index: &index, Event: &wireEvent{Kind: out.Kind, CreatedAt: out.CreatedAt, Tags: out.Tags, Content: out.Content}}
		if err := l.roundTrip(ctx, MethodSignEvent, params, &res); err != nil {
			return err
		}
		out.PubKey = pk
		if res.PubKey != pk {
			return fmt.Errorf("nsigner sign_event: the device signed as %s, but key index %d is %s; refusing it: %w", truncate(res.PubKey, 80), index, pk, ErrBadSignature)
		}
		id := out.ComputeID()
		if res.ID != id {
			return fmt.Errorf("nsigner sign_event: the device's event id %s is not the event's id %s; refusing it: %w", truncate(res.ID, 80), id, ErrBadSignature)
		}
		out.ID, out.Sig = id, res.Sig
		if err := nostr.VerifyEvent(out); err != nil {
			return fmt.Errorf("nsigner sign_event: the device's signature on %s does not verify against %s (%v); refusing it: %w", id, pk, err, ErrBadSignature)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Nip44Encrypt encrypts plaintext from key index to peer (hex pubkey) with
// NIP-44 version 2.
func (c *Client) Nip44Encrypt(ctx context.Context, index uint32, peer, plaintext string) (string, error) {
	return c.crypt(ctx, MethodNip44Encrypt, index, peer, plaintext)
}

// Nip44Decrypt decrypts a NIP-44 payload peer sent to key index.
func (c *Client) Nip44Decrypt(ctx context.Context, index uint32, peer, payload string) (string, error) {
	return c.crypt(ctx, MethodNip44Decrypt, index, peer, payload)
}

// Nip04Encrypt encrypts plaintext from key index to peer with NIP-04.
func (c *Client) Nip04Encrypt(ctx context.Context, index uint32, peer, plaintext string) (string, error) {
	return c.crypt(ctx, MethodNip04Encrypt, index, peer, plaintext)
}

// Nip04Decrypt decrypts a NIP-04 payload peer sent to key index.
func (c *Client) Nip04Decrypt(ctx context.Context, index uint32, peer, payload string) (string, error) {
	return c.crypt(ctx, MethodNip04Decrypt, index, peer, payload)
}

func (c *Client) crypt(ctx context.Context, method string, index uint32, peer, text string) (string, error) {
	if !isHex(peer, 32) {
		return "", fmt.Errorf("nsigner %s: peer pubkey %q is not 64 hex digits", method, truncate(peer, 80))
	}
	var res textResult
	err := c.do(ctx, method, func(l *link) error {
		return l.roundTrip(ctx, method, cryptParams{Index: &index, PubKey: peer, Text: text}, &res)
	})
	return res.Text, err
}

// timeoutFor is how long method may take.
func (c *Client) timeoutFor(method string) time.Duration {
	switch method {
	case MethodSignEvent, MethodNip44Decrypt, MethodNip04Decrypt:
		return c.cfg.SlowTimeout
	}
	return c.cfg.Timeout
}

// do runs fn with the link to itself, waiting (within method's timeout) for
// the call before it and for the link to be up.
func (c *Client) do(ctx context.Context, method string, fn func(*link) error) error {
	d := c.timeoutFor(method)
	wctx, cancel := context.WithTimeoutCause(ctx, d, errCallTimeout)
	defer cancel()
	select {
	case c.slot <- struct{}{}:
	case <-wctx.Done():
		return c.waitErr(wctx, method, d, "waiting for the request before it to finish")
	}
	defer func() { <-c.slot }()
	l, err := c.waitLink(wctx, method, d)
	if err != nil {
		return err
	}
	return fn(l)
}

// waitLink returns the current link, waiting for a reconnection (and
// hurrying it) when there is none. It fails when an attempt made after the
// call started fails.
func (c *Client) waitLink(ctx context.Context, method string, d time.Duration) (*link, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.attempts
	for {
		if c.closed {
			return nil, fmt.Errorf("nsigner %s: %w", method, ErrClosed)
		}
		if c.cur != nil {
			return c.cur, nil
		}
		if c.attempts > start && c.state == StateDisconnected {
			return nil, fmt.Errorf("nsigner %s: not connected to %s %s: %v: %w", method, c.cfg.Transport, c.cfg.Device, c.lastErr, ErrLinkDown)
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case c.kickc <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			return nil, c.waitErr(ctx, method, d, "waiting for the link to "+c.cfg.Device)
		}
		c.mu.Lock()
	}
}

// waitErr explains a wait that ended with ctx.
func (c *Client) waitErr(ctx context.Context, method string, d time.Duration, what string) error {
	if errors.Is(context.Cause(ctx), errCallTimeout) {
		return &Error{Method: method, Code: CodeTimeout, Message: fmt.Sprintf("timed out after %s %s", d, what), Local: true}
	}
	return fmt.Errorf("nsigner %s: %s: %w", method, what, ctx.Err())
}

// run keeps the link up until Close.
func (c *Client) run() {
	defer close(c.done)
	backoff := c.cfg.MinBackoff
	var wait time.Duration
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-c.kickc:
				t.Stop()
			}
		}
		c.setState(StateConnecting, nil, false)
		l, hello, err := c.connect()
		if c.ctx.Err() != nil {
			if l != nil {
				l.shutdown(ErrClosed)
			}
			c.setState(StateDisconnected, ErrClosed, true)
			return
		}
		if err != nil {
			c.setState(StateDisconnected, err, true)
			c.log.Warn("nsigner connection failed; retrying", "error", err.Error(), "retry_in", backoff.String())
			wait, backoff = backoff, min(backoff*2, c.cfg.MaxBackoff)
			continue
		}
		c.mu.Lock()
		c.cur, c.hello = l, hello
		c.mu.Unlock()
		c.setState(StateConnected, nil, true)
		c.log.Info("nsigner connected", "device_name", hello.Device, "keys", hello.Keys)
		backoff = c.cfg.MinBackoff
		select {
		case <-l.done:
			wait = c.cfg.MinBackoff
		case <-c.ctx.Done():
			l.shutdown(ErrClosed)
			c.setState(StateDisconnected, ErrClosed, false)
			return
		}
	}
}

// setState records a state change; attempt marks the end of a connection
// attempt. err nil keeps the last error.
func (c *Client) setState(s LinkState, err error, attempt bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != c.state {
		c.state, c.since = s, time.Now()
	}
	if err != nil {
		c.lastErr = err
	}
	if attempt {
		c.attempts++
	}
	c.broadcastLocked()
}

func (c *Client) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// connect opens the transport and says hello.
func (c *Client) connect() (*link, HelloResult, error) {
	var h HelloResult
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	rw, err := openTransport(ctx, &c.cfg)
	if err != nil {
		return nil, h, err
	}
	l := &link{c: c, rw: rw, done: make(chan struct{}), pubkeys: map[uint32]string{}}
	go l.readLoop()
	if err := l.roundTrip(ctx, MethodHello, nil, &h); err != nil {
		l.shutdown(err)
		return nil, h, err
	}
	if h.Proto != Proto {
		err := fmt.Errorf("nsigner hello: the device speaks %q, not %q", truncate(h.Proto, 64), Proto)
		l.shutdown(err)
		return nil, h, err
	}
	h.Device = truncate(h.Device, 128)
	return l, h, nil
}

// linkDown is called once when l's reader ends.
func (c *Client) linkDown(l *link, err error) {
	c.mu.Lock()
	if c.cur != l {
		c.mu.Unlock()
		return
	}
	c.cur = nil
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		c.log.Warn("nsigner link broke; reconnecting", "error", err.Error())
	}
	c.setState(StateConnecting, err, false)
}

// link is one open connection.
type link struct {
	c    *Client
	rw   io.ReadWriteCloser
	done chan struct{} // closed when the reader has ended
	err  error         // why; set before done is closed
	once sync.Once

	mu        sync.Mutex
	pendingID string
	pendingCh chan response
	dropNote  string // why a line was dropped while the request was pending

	pubkeys map[uint32]string // used only while holding the client's slot
}

// readLoop delivers the reply to the pending request and drops other lines.
func (l *link) readLoop() {
	lr := newLineReader(l.rw)
	for {
		line, err := lr.next()
		var tl errLineTooLong
		if errors.As(err, &tl) {
			l.drop("longer than the line limit", tl.n)
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the device closed the link")
			}
			l.shutdown(err)
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r response
		if err := json.Unmarshal(line, &r); err != nil {
			l.drop("not a JSON object", len(line))
			continue
		}
		l.mu.Lock()
		if l.pendingCh != nil && r.ID != "" && r.ID == l.pendingID {
			l.pendingCh <- r
			l.pendingCh, l.pendingID = nil, ""
			l.mu.Unlock()
			continue
		}
		l.mu.Unlock()
		l.drop("an id this host is not waiting for", len(line))
	}
}

// drop counts and logs (never the content of) a line the host ignores.
func (l *link) drop(why string, n int) {
	l.c.drops.Add(1)
	l.c.log.Debug("nsigner line dropped", "reason", why, "bytes", n)
	l.mu.Lock()
	if l.pendingCh != nil {
		l.dropNote = fmt.Sprintf("; a %d-byte line was dropped meanwhile: %s", n, why)
	}
	l.mu.Unlock()
}

// shutdown closes the link once, recording why.
func (l *link) shutdown(err error) {
	l.once.Do(func() {
		l.err = err
		l.rw.Close()
		l.c.linkDown(l, err)
		close(l.done)
	})
}

// pubkey returns key index's public key, asking the device once per link.
func (l *link) pubkey(ctx context.Context, index uint32) (string, error) {
	if pk, ok := l.pubkeys[index]; ok {
		return pk, nil
	}
	var res pubkeyResult
	if err := l.roundTrip(ctx, MethodGetPublicKey, indexParams{Index: &index}, &res); err != nil {
		return "", err
	}
	if !isHex(res.PubKey, 32) {
		return "", fmt.Errorf("nsigner get_public_key: the device answered %q for key index %d, not 64 hex digits", truncate(res.PubKey, 80), index)
	}
	l.pubkeys[index] = res.PubKey
	return res.PubKey, nil
}

// roundTrip sends one request and waits for its reply, decoding the result
// into out.
func (l *link) roundTrip(ctx context.Context, method string, params, out any) error {
	d := l.c.timeoutFor(method)
	ctx, cancel := context.WithTimeoutCause(ctx, d, errCallTimeout)
	defer cancel()
	id := strconv.FormatUint(l.c.nextID.Add(1), 10)
	line, err := encodeLine(request{V: Version, ID: id, Method: method, Params: params})
	if err != nil {
		var tl errLineTooLong
		if errors.As(err, &tl) {
			return &Error{Method: method, Code: CodeTooLarge, Local: true,
				Message: fmt.Sprintf("the request is %d bytes; one nsigner line carries at most %d", tl.n, MaxLine)}
		}
		return fmt.Errorf("nsigner %s: encode the request: %w", method, err)
	}
	ch := make(chan response, 1)
	l.mu.Lock()
	l.pendingID, l.pendingCh, l.dropNote = id, ch, ""
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.pendingID == id {
			l.pendingID, l.pendingCh = "", nil
		}
		l.mu.Unlock()
	}()

	if dl, ok := l.rw.(interface{ SetWriteDeadline(time.Time) error }); ok {
		dl.SetWriteDeadline(time.Now().Add(l.c.cfg.Timeout))
	}
	if _, err := l.rw.Write(line); err != nil {
		l.shutdown(fmt.Errorf("write: %w", err))
		<-l.done
		return fmt.Errorf("nsigner %s: sending the request to %s failed: %v: %w", method, l.c.cfg.Device, l.err, ErrLinkDown)
	}

	select {
	case r := <-ch:
		return decodeReply(method, r, out)
	case <-l.done:
		return fmt.Errorf("nsigner %s: the link to %s broke before the reply came (%v); the device may or may not have acted on the request: %w", method, l.c.cfg.Device, l.err, ErrLinkDown)
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errCallTimeout) {
			l.mu.Lock()
			note := l.dropNote
			l.mu.Unlock()
			return &Error{Method: method, Code: CodeTimeout, Local: true,
				Message: fmt.Sprintf("no reply within %s (a person may not have answered on the device)%s", d, note)}
		}
		return fmt.Errorf("nsigner %s: %w", method, ctx.Err())
	}
}

// decodeReply turns a reply into out or an error.
func decodeReply(method string, r response, out any) error {
	if r.V != Version {
		return fmt.Errorf("nsigner %s: the device replied with protocol version %d; this host speaks %d", method, r.V, Version)
	}
	if r.Error != nil {
		code := r.Error.Code
		if code == "" {
			code = "(no code)"
		}
		return &Error{Method: method, Code: truncate(code, 64), Message: truncate(r.Error.Message, 512)}
	}
	if len(r.Result) == 0 {
		return fmt.Errorf("nsigner %s: the device's reply has neither result nor error", method)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("nsigner %s: the device's result is not what protocol version 1 describes: %v", method, err)
	}
	return nil
}

func copyTags(tags [][]string) [][]string {
	out := make([][]string, len(tags))
	for i, t := range tags {
		out[i] = append([]string{}, t...)
	}
	return out
}

// isHex reports whether s is n bytes in lowercase hex.
func isHex(s string, n int) bool {
	if len(s) != 2*n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
