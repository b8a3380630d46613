package nip46

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46/internal/relaypool"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Kind is the event kind of NIP-46 requests and responses.
const Kind = 24133

// Defaults of Config.
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultNIP04Fallback  = 5 * time.Second
	DefaultLinkWait       = 10 * time.Second
)

// Link states reported by Client.State.
const (
	// LinkConnected: at least one relay is connected and subscribed.
	LinkConnected = "connected"
	// LinkConnecting: no relay is up, and the client is (re)trying.
	LinkConnecting = "connecting"
	// LinkDisconnected: the client is closed, or every relay has failed
	// at least disconnectedAfter times in a row (it keeps retrying).
	LinkDisconnected = "disconnected"
)

// sinceSlack is how far before Dial the subscription starts.
const sinceSlack = 5 * time.Minute

// disconnectedAfter is how many failures in a row turn "connecting" into
// "disconnected".
const disconnectedAfter = 3

// Config configures Dial.
type Config struct {
	// BunkerURL is the bunker://<remote-signer-pubkey>?relay=…&secret=…
	// token (required).
	BunkerURL string
	// ClientKey is the client keypair that talks to the remote signer;
	// nil generates a fresh ephemeral one. Once Dial succeeds the client
	// owns the key and Close wipes it; if Dial fails, a key given here is
	// left as it was.
	ClientKey *nostr.SecretKey
	// OnAuthURL is called, from its own goroutine, when the remote signer
	// answers a request with an auth challenge (result "auth_url"): the
	// user must open the URL (an http or https URL) to approve. The
	// request keeps waiting for the real answer until its deadline.
	OnAuthURL func(url string)
	// OnProgress, if set, is told what Dial is doing ("connecting to 2
	// relays", "asking the remote signer to connect" …), for a login
	// progress display. It is called from Dial's goroutine; messages hold
	// no secret.
	OnProgress func(message string)
	// RequestTimeout bounds each request (on top of its context); zero
	// or less means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Perms, if set, is sent with connect as the requested permissions
	// (NIP-46 format: "sign_event:1,nip44_encrypt").
	Perms string
	// NIP04Fallback is how long connect, sent NIP-44 encrypted, waits for
	// any answer before it is sent again NIP-04 encrypted (for old
	// bunkers); zero means DefaultNIP04Fallback, negative disables.
	NIP04Fallback time.Duration
	// LinkWait is how long a request waits for a relay to come back when
	// none is connected, before it fails with ErrLinkDown; zero or less
	// means DefaultLinkWait.
	LinkWait time.Duration
	// ReconnectMin and ReconnectMax bound the wait between reconnection
	// attempts to a relay (defaults 250ms and 30s).
	ReconnectMin, ReconnectMax time.Duration
	// Logger gets connection events; nil discards. Secrets, plaintexts
	// and decrypted content are never logged.
	Logger *slog.Logger
}

// LinkState describes the client's link to the remote signer.
type LinkState struct {
	// State is LinkConnected, LinkConnecting or LinkDisconnected.
	State string
	// LastError names the failing relays and why ("" when all are up).
	LastError string
	// PendingAuthURL is the auth URL of a request still waiting for the
	// user's approval, or "".
	PendingAuthURL string
}

// Client is a NIP-46 remote-signing client connected to one remote
// signer ("bunker") through relays; see the package documentation for
// how it talks to it. Its methods are safe for concurrent use.
type Client struct {
	remote        string
	clientPub     string
	user          string
	onAuthURL     func(string)
	reqTimeout    time.Duration
	linkWait      time.Duration
	fallbackAfter time.Duration
	onFallback    func() // set by Dial around connect, for progress messages
	log           *slog.Logger
	pool          *relaypool.Pool
	done          chan struct{}

	keyMu sync.RWMutex // guards key and conv against the wipe in Close
	key   *nostr.SecretKey
	conv  [32]byte

	mu       sync.Mutex
	closed   bool
	pending  map[string]*call
	seen     seenSet
	nip04    bool
	authCall string // request id of the pending auth challenge
	authURL  string
}

// call is a request waiting for its answer.
type call struct {
	method   string
	events   []*nostr.Event // request events sent (NIP-44, then maybe NIP-04)
	answered bool           // any answer came, an auth challenge included
	reply    chan response  // gets the final answer, once
}

type response struct {
	result string
	errMsg string
}

// Dial connects to the remote signer of cfg.BunkerURL: it connects to its
// relays, subscribes to the responses, sends connect (with the secret)
// and requires "ack" (or the secret echoed back), then asks
// get_public_key for the user's pubkey. ctx bounds the whole of it (each
// request is also bounded by RequestTimeout). On failure nothing is left
// open.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	b, err := ParseBunkerURL(cfg.BunkerURL)
	if err != nil {
		return nil, err
	}
	key := cfg.ClientKey
	generated := key == nil
	if generated {
		if key, err = nostr.NewSecretKey(); err != nil {
			return nil, fmt.Errorf("nip46: generate a client key: %w", err)
		}
	} else if key.Wiped() {
		return nil, errors.New("nip46: Config.ClientKey has been wiped")
	}
	conv, err := nostr.ConversationKey(key, b.RemoteSignerPubkey)
	if err != nil {
		if generated {
			key.Wipe()
		}
		return nil, fmt.Errorf("nip46: conversation key with the remote signer: %w", err)
	}
	c := &Client{
		remote:        b.RemoteSignerPubkey,
		clientPub:     key.PublicKey(),
		onAuthURL:     cfg.OnAuthURL,
		reqTimeout:    positiveOr(cfg.RequestTimeout, DefaultRequestTimeout),
		linkWait:      positiveOr(cfg.LinkWait, DefaultLinkWait),
		fallbackAfter: cfg.NIP04Fallback,
		log:           cfg.Logger,
		done:          make(chan struct{}),
		key:           key,
		conv:          conv,
		pending:       map[string]*call{},
	}
	if c.fallbackAfter == 0 {
		c.fallbackAfter = DefaultNIP04Fallback
	}
	clear(conv[:])
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// "since" keeps out what relays stored long before this client; it
	// is generous because a remote signer's clock may be behind ours and
	// relays apply it to live events too. Old answers match no request.
	since := time.Now().Add(-sinceSlack).Unix()
	c.pool = relaypool.New(relaypool.Config{
		URLs: b.Relays,
		Filter: func() relaypool.Filter {
			return relaypool.Filter{
				Kinds:   []int{Kind},
				Authors: []string{c.remote},
				Tags:    map[string][]string{"p": {c.clientPub}},
				Since:   &since,
			}
		},
		OnEvent:    c.handleEvent,
		Resend:     c.unanswered,
		Logger:     c.log,
		MinBackoff: cfg.ReconnectMin,
		MaxBackoff: cfg.ReconnectMax,
	})
	progress := func(format string, args ...any) {
		if cfg.OnProgress != nil {
			cfg.OnProgress(fmt.Sprintf(format, args...))
		}
	}
	progress("connecting to %d relay(s): %s", len(b.Relays), strings.Join(b.Relays, ", "))
	fail := func(err error) (*Client, error) {
		c.shutdown(generated)
		return nil, err
	}
	if err := c.pool.WaitUp(ctx, true); err != nil {
		detail := c.linkDetail()
		if ctx.Err() != nil {
			detail += " (" + ctx.Err().Error() + ")"
		}
		return fail(&Error{Kind: ErrLinkDown, Detail: detail, Cause: ctx.Err()})
	}
	progress("connected to %d of %d relay(s); asking remote signer %s to connect", c.pool.Up(), len(b.Relays), shortKey(c.remote))
	params := []string{c.remote, b.Secret}
	if cfg.Perms != "" {
		params = append(params, cfg.Perms)
	}
	c.onFallback = func() { progress("no answer yet; asking again with NIP-04 encryption, for older remote signers") }
	res, err := c.call(ctx, "connect", params, true)
	c.onFallback = nil
	if err != nil {
		return fail(err)
	}
	if res != "ack" && (b.Secret == "" || subtle.ConstantTimeCompare([]byte(res), []byte(b.Secret)) != 1) {
		return fail(&Error{Kind: ErrBadResponse, Method: "connect", Detail: `the remote signer did not answer "ack"`})
	}
	progress("remote signer accepted the connection; asking for the user's public key")
	res, err = c.call(ctx, "get_public_key", []string{}, false)
	if err != nil {
		return fail(err)
	}
	if c.user, err = nostr.ParsePublicKey(res); err != nil || len(strings.TrimSpace(res)) != 64 {
		return fail(&Error{Kind: ErrBadResponse, Method: "get_public_key", Detail: "the answer is not a pubkey of 64 hex characters"})
	}
	c.log.Info("nip46: connected to the remote signer", "remote_signer", c.remote, "user", c.user, "relays", len(b.Relays))
	return c, nil
}

// shortKey abbreviates a hex pubkey for messages.
func shortKey(pub string) string {
	if len(pub) > 16 {
		return pub[:8] + "…" + pub[len(pub)-8:]
	}
	return pub
}

func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// PublicKey returns the user's pubkey (64 hex), learnt from
// get_public_key. It may differ from the remote signer's pubkey.
func (c *Client) PublicKey() string { return c.user }

// RemoteSignerPubkey returns the remote signer's pubkey (64 hex).
func (c *Client) RemoteSignerPubkey() string { return c.remote }

// ClientPubkey returns the client keypair's pubkey (64 hex).
func (c *Client) ClientPubkey() string { return c.clientPub }

// SignEvent asks the remote signer to sign ev (its Kind, CreatedAt, Tags
// and Content; a zero CreatedAt is set to now) and checks the answer: the
// id must be the event's hash, the BIP-340 signature valid, the pubkey
// the user's, and kind, created_at, tags and content those asked for;
// otherwise the error is ErrBadSignature. ev is not modified.
func (c *Client) SignEvent(ctx context.Context, ev *nostr.Event) (*nostr.Event, error) {
	if ev == nil {
		return nil, errors.New("nip46: SignEvent: no event")
	}
	tmpl := struct {
		Kind      int        `json:"kind"`
		Content   string     `json:"content"`
		Tags      [][]string `json:"tags"`
		CreatedAt int64      `json:"created_at"`
	}{ev.Kind, ev.Content, ev.Tags, ev.CreatedAt}
	if tmpl.Tags == nil {
		tmpl.Tags = [][]string{}
	}
	if tmpl.CreatedAt == 0 {
		tmpl.CreatedAt = time.Now().Unix()
	}
	param, err := json.Marshal(tmpl)
	if err != nil {
		return nil, fmt.Errorf("nip46: SignEvent: encode the event: %w", err)
	}
	res, err := c.call(ctx, "sign_event", []string{string(param)}, false)
	if err != nil {
		return nil, err
	}
	bad := func(detail string) (*nostr.Event, error) {
		return nil, &Error{Kind: ErrBadSignature, Method: "sign_event", Detail: detail}
	}
	var got nostr.Event
	if err := json.Unmarshal([]byte(res), &got); err != nil {
		return bad("the answer is not an event")
	}
	if err := nostr.VerifyEvent(&got); err != nil {
		return bad(strings.TrimPrefix(err.Error(), "nostr: verify: "))
	}
	switch {
	case got.PubKey != c.user:
		return bad(fmt.Sprintf("signed by %s, not by the user %s", got.PubKey, c.user))
	case got.Kind != tmpl.Kind:
		return bad(fmt.Sprintf("kind changed from %d to %d", tmpl.Kind, got.Kind))
	case got.CreatedAt != tmpl.CreatedAt:
		return bad(fmt.Sprintf("created_at changed from %d to %d", tmpl.CreatedAt, got.CreatedAt))
	case got.Content != tmpl.Content:
		return bad("content changed")
	case !slices.EqualFunc(got.Tags, tmpl.Tags, slices.Equal[[]string]):
		return bad("tags changed")
	}
	if got.Tags == nil {
		got.Tags = [][]string{}
	}
	return &got, nil
}

// Nip44Encrypt asks the remote signer to NIP-44 encrypt plaintext from
// the user to peer (64 hex or npub).
func (c *Client) Nip44Encrypt(ctx context.Context, peer, plaintext string) (string, error) {
	return c.crypt(ctx, "nip44_encrypt", peer, plaintext)
}

// Nip44Decrypt asks the remote signer to decrypt a NIP-44 payload that
// peer (64 hex or npub) sent to the user.
func (c *Client) Nip44Decrypt(ctx context.Context, peer, ciphertext string) (string, error) {
	return c.crypt(ctx, "nip44_decrypt", peer, ciphertext)
}

// Nip04Encrypt asks the remote signer to NIP-04 encrypt plaintext from
// the user to peer (64 hex or npub).
func (c *Client) Nip04Encrypt(ctx context.Context, peer, plaintext string) (string, error) {
	return c.crypt(ctx, "nip04_encrypt", peer, plaintext)
}

// Nip04Decrypt asks the remote signer to decrypt a NIP-04 payload that
// peer (64 hex or npub) sent to the user.
func (c *Client) Nip04Decrypt(ctx context.Context, peer, ciphertext string) (string, error) {
	return c.crypt(ctx, "nip04_decrypt", peer, ciphertext)
}

func (c *Client) crypt(ctx context.Context, method, peer, text string) (string, error) {
	pub, err := nostr.ParsePublicKey(peer)
	if err != nil {
		return "", fmt.Errorf("nip46: %s: peer pubkey: %s", method, strings.TrimPrefix(err.Error(), "nostr: "))
	}
	return c.call(ctx, method, []string{pub, text}, false)
}

// Ping asks the remote signer for "pong".
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, "ping", []string{}, false)
	return err
}

// Logout tells the remote signer the session is over (a courtesy: the
// caller must still Close, which wipes the client key).
func (c *Client) Logout(ctx context.Context) error {
	_, err := c.call(ctx, "logout", []string{}, false)
	return err
}

// State reports the link to the remote signer.
func (c *Client) State() LinkState {
	c.mu.Lock()
	closed, authURL := c.closed, c.authURL
	c.mu.Unlock()
	if closed {
		return LinkState{State: LinkDisconnected, LastError: "the client is closed"}
	}
	st := LinkState{State: LinkDisconnected, PendingAuthURL: authURL}
	var errs []string
	for _, r := range c.pool.Status() {
		switch {
		case r.State == relaypool.StateUp:
			st.State = LinkConnected
		case st.State != LinkConnected && r.Failures < disconnectedAfter:
			st.State = LinkConnecting
		}
		if r.State != relaypool.StateUp && r.Err != "" {
			errs = append(errs, r.URL+": "+r.Err)
		}
	}
	st.LastError = strings.Join(errs, "; ")
	return st
}

// Close disconnects from the relays, fails the requests in flight with
// ErrClosed and wipes the client key. It is idempotent and returns nil.
func (c *Client) Close() error {
	c.shutdown(true)
	return nil
}

// shutdown closes the client; wipe says whether to wipe the key.
func (c *Client) shutdown(wipe bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.done)
	c.authCall, c.authURL = "", ""
	c.mu.Unlock()
	c.pool.Close()
	c.keyMu.Lock()
	if wipe {
		c.key.Wipe()
	}
	c.key = nil
	clear(c.conv[:])
	c.keyMu.Unlock()
}

// call sends one request and waits for its answer. With fallback set
// (connect) the request is sent again NIP-04 encrypted if nothing comes
// back within fallbackAfter.
func (c *Client) call(ctx context.Context, method string, params []string, fallback bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	defer cancel()
	id := randomID()
	cl := &call{method: method, reply: make(chan response, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", &Error{Kind: ErrClosed, Method: method}
	}
	useNIP04 := c.nip04
	c.pending[id] = cl
	c.mu.Unlock()
	defer c.forget(id)

	if err := c.send(ctx, cl, id, method, params, useNIP04); err != nil {
		return "", err
	}
	var fallbackC <-chan time.Time
	if fallback && !useNIP04 && c.fallbackAfter > 0 {
		t := time.NewTimer(c.fallbackAfter)
		defer t.Stop()
		fallbackC = t.C
	}
	for {
		select {
		case r := <-cl.reply:
			if r.errMsg != "" {
				return "", &Error{Kind: ErrRejected, Method: method, Detail: clip(r.errMsg)}
			}
			return r.result, nil
		case <-fallbackC:
			fallbackC = nil
			c.mu.Lock()
			answered := cl.answered
			c.mu.Unlock()
			if answered {
				continue
			}
			c.log.Info("nip46: no answer to a NIP-44 request; sending it again NIP-04 encrypted", "method", method, "remote_signer", c.remote)
			if c.onFallback != nil {
				c.onFallback()
			}
			if err := c.send(ctx, cl, id, method, params, true); err != nil && !errors.Is(err, ErrLinkDown) {
				return "", err
			}
		case <-ctx.Done():
			return "", c.waitError(ctx, id, method)
		case <-c.done:
			return "", &Error{Kind: ErrClosed, Method: method, Detail: "closed while waiting for the answer"}
		}
	}
}

// send encrypts, signs and publishes one request event for cl.
func (c *Client) send(ctx context.Context, cl *call, id, method string, params []string, nip04 bool) error {
	ev, err := c.requestEvent(id, method, params, nip04)
	if err != nil {
		return err
	}
	// Record the event before publishing: a relay that comes up from now
	// on gets it through Resend.
	c.mu.Lock()
	cl.events = append(cl.events, ev)
	c.mu.Unlock()
	if n, _ := c.pool.Publish(ctx, ev); n > 0 {
		return nil
	}
	// No relay is up: wait for one (it is sent the event when it comes).
	wctx, cancel := context.WithTimeout(ctx, c.linkWait)
	defer cancel()
	if err := c.pool.WaitUp(wctx, false); err != nil {
		select {
		case <-c.done:
			return &Error{Kind: ErrClosed, Method: method}
		default:
		}
		return &Error{Kind: ErrLinkDown, Method: method, Detail: c.linkDetail(), Cause: ctx.Err()}
	}
	return nil
}

// requestEvent builds the signed kind 24133 event carrying a request.
func (c *Client) requestEvent(id, method string, params []string, nip04 bool) (*nostr.Event, error) {
	if params == nil {
		params = []string{}
	}
	body, err := json.Marshal(struct {
		ID     string   `json:"id"`
		Method string   `json:"method"`
		Params []string `json:"params"`
	}{id, method, params})
	if err != nil {
		return nil, fmt.Errorf("nip46: %s: encode the request: %w", method, err)
	}
	ev := &nostr.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      Kind,
		Tags:      [][]string{{"p", c.remote}},
	}
	c.keyMu.RLock()
	defer c.keyMu.RUnlock()
	if c.key == nil {
		return nil, &Error{Kind: ErrClosed, Method: method}
	}
	if nip04 {
		ev.Content, err = nostr.Nip04Encrypt(c.key, c.remote, string(body))
	} else {
		ev.Content, err = nostr.Nip44Encrypt(string(body), c.conv)
	}
	clear(body)
	if err != nil {
		return nil, fmt.Errorf("nip46: %s: encrypt the request: %w", method, err)
	}
	if err := nostr.SignEvent(c.key, ev); err != nil {
		return nil, fmt.Errorf("nip46: %s: sign the request: %w", method, err)
	}
	return ev, nil
}

// waitError is the error of a request whose context ended.
func (c *Client) waitError(ctx context.Context, id, method string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return &Error{Kind: ErrTimeout, Method: method, Detail: "cancelled", Cause: ctx.Err()}
	}
	c.mu.Lock()
	auth := c.authCall == id
	c.mu.Unlock()
	switch {
	case c.pool.Up() == 0:
		return &Error{Kind: ErrLinkDown, Method: method, Detail: c.linkDetail(), Cause: ctx.Err()}
	case auth:
		return &Error{Kind: ErrTimeout, Method: method, Detail: "the remote signer asked the user to approve at its auth URL, and no answer came", Cause: ctx.Err()}
	default:
		return &Error{Kind: ErrTimeout, Method: method, Detail: "no answer from remote signer " + c.remote, Cause: ctx.Err()}
	}
}

// linkDetail names the failing relays.
func (c *Client) linkDetail() string {
	if s := c.State().LastError; s != "" {
		return s
	}
	return "no relay is connected"
}

// forget drops a finished request.
func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	if c.authCall == id {
		c.authCall, c.authURL = "", ""
	}
	c.mu.Unlock()
}

// unanswered returns the request events of calls still waiting for any
// answer, for a relay that has just (re)connected.
func (c *Client) unanswered() []*nostr.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*nostr.Event
	for _, cl := range c.pending {
		if !cl.answered {
			out = append(out, cl.events...)
		}
	}
	return out
}

// handleEvent processes one event from a relay (already checked by the
// pool: valid id and signature, matching the subscription).
func (c *Client) handleEvent(relay string, ev *nostr.Event) {
	if ev.Kind != Kind || ev.PubKey != c.remote || !pTagged(ev, c.clientPub) {
		c.log.Debug("nip46: ignored an event not from the remote signer to us", "relay", relay, "event", ev.ID)
		return
	}
	c.mu.Lock()
	if c.closed || !c.seen.add(ev.ID) {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()

	nip04 := strings.Contains(ev.Content, "?iv=")
	plain, err := c.decrypt(ev.Content, nip04)
	if err != nil {
		c.log.Warn("nip46: could not decrypt an answer of the remote signer; ignored", "relay", relay, "event", ev.ID, "nip04", nip04)
		return
	}
	var msg struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	err = json.Unmarshal(plain, &msg)
	clear(plain)
	if err != nil || msg.ID == "" {
		c.log.Warn("nip46: the remote signer sent an answer that is not a NIP-46 response; ignored", "relay", relay, "event", ev.ID)
		return
	}
	result, errMsg := rawString(msg.Result), rawString(msg.Error)

	c.mu.Lock()
	cl := c.pending[msg.ID]
	if cl == nil {
		c.mu.Unlock()
		c.log.Debug("nip46: answer to no pending request; ignored", "relay", relay, "event", ev.ID)
		return
	}
	if nip04 && !c.nip04 {
		c.nip04 = true
		c.log.Info("nip46: the remote signer answers in NIP-04; later requests use NIP-04", "remote_signer", c.remote)
	}
	cl.answered = true
	if result == "auth_url" {
		if !isHTTPURL(errMsg) {
			delete(c.pending, msg.ID)
			c.mu.Unlock()
			cl.reply <- response{errMsg: "the remote signer sent an auth challenge whose URL is not an http(s) URL"}
			return
		}
		c.authCall, c.authURL = msg.ID, errMsg
		c.mu.Unlock()
		c.log.Info("nip46: the remote signer asks the user to approve at its auth URL", "method", cl.method)
		if c.onAuthURL != nil {
			go c.onAuthURL(errMsg)
		}
		return
	}
	delete(c.pending, msg.ID)
	if c.authCall == msg.ID {
		c.authCall, c.authURL = "", ""
	}
	c.mu.Unlock()
	cl.reply <- response{result: result, errMsg: errMsg}
}

// decrypt opens a response's content; the caller clears the result.
func (c *Client) decrypt(content string, nip04 bool) ([]byte, error) {
	c.keyMu.RLock()
	defer c.keyMu.RUnlock()
	if c.key == nil {
		return nil, ErrClosed
	}
	var s string
	var err error
	if nip04 {
		s, err = nostr.Nip04Decrypt(c.key, c.remote, content)
	} else {
		s, err = nostr.Nip44Decrypt(content, c.conv)
	}
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// rawString returns a JSON string's value, a JSON null as "", and any
// other JSON value as its text (some signers send results unquoted).
func rawString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func pTagged(ev *nostr.Event, pub string) bool {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" && t[1] == pub {
			return true
		}
	}
	return false
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// seenSet remembers the last seenMax event ids, to drop an answer that
// several relays deliver.
type seenSet struct {
	m    map[string]struct{}
	ring []string
	next int
}

const seenMax = 1024

// add records id; it reports false if id was already there.
func (s *seenSet) add(id string) bool {
	if s.m == nil {
		s.m = make(map[string]struct{}, seenMax)
		s.ring = make([]string, seenMax)
	}
	if _, ok := s.m[id]; ok {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % seenMax
	s.m[id] = struct{}{}
	return true
}
