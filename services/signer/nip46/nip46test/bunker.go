package nip46test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46/internal/relaypool"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// KindNIP46 is the kind of NIP-46 request and response events.
const KindNIP46 = 24133

const relayWriteTimeout = 5 * time.Second

// BunkerConfig configures a test remote signer.
type BunkerConfig struct {
	// Relays are the relay URLs the bunker listens and answers on
	// (required).
	Relays []string
	// UserKey signs events and encrypts for the user; nil generates one.
	UserKey *nostr.SecretKey
	// SignerKey is the remote-signer key that encrypts the NIP-46 traffic
	// and authors the responses; nil means UserKey.
	SignerKey *nostr.SecretKey
	// Secret, if set, must be the second parameter of connect (from a
	// client that has not connected before).
	Secret string
	// SingleUseSecret makes the secret good for one client only, as NIP-46
	// recommends; by default any number of clients may use it.
	SingleUseSecret bool
	// NIP04Only makes the bunker speak only NIP-04: it cannot decrypt
	// NIP-44 requests and ignores them, as old bunkers do.
	NIP04Only bool
	// AuthURL is sent as an auth challenge (result "auth_url") to the
	// first request of each method in AuthFor. The real answer follows
	// when the test calls Approve, or after AuthDelay if that is set.
	AuthURL   string
	AuthFor   []string
	AuthDelay time.Duration
	// Reject maps a method to the error the bunker answers it with.
	Reject map[string]string
	// TamperSignedEvent, if set, may change the signed event before
	// sign_event returns it (to test that clients verify it).
	TamperSignedEvent func(*nostr.Event)
	// Logger gets relay connection events; nil discards.
	Logger *slog.Logger
}

// Request records one request the bunker received.
type Request struct {
	Method string
	// Client is the client pubkey (hex) that sent it.
	Client string
	// NIP04 says whether the request was NIP-04 encrypted (else NIP-44).
	NIP04 bool
}

// Bunker is a NIP-46 remote signer ("bunker") on real relays. It answers
// connect, get_public_key, sign_event, nip44_encrypt, nip44_decrypt,
// nip04_encrypt, nip04_decrypt, ping and logout; other methods get an
// error. Requests other than connect are refused until the client has
// connected. Each response is encrypted with the scheme of its request.
type Bunker struct {
	cfg    BunkerConfig
	user   *nostr.SecretKey
	signer *nostr.SecretKey
	pool   *relaypool.Pool
	start  time.Time

	mu         sync.Mutex
	closed     bool
	authorized map[string]bool           // client pubkeys that connected
	secretUsed string                    // client that used the single-use secret
	seen       map[string][]*nostr.Event // request event id → replies sent
	authed     map[string]bool           // methods whose auth challenge was sent
	held       []heldReply               // replies waiting for Approve
	received   []Request
	timers     []*time.Timer
}

// NewBunker starts a bunker, waits until it is subscribed on every relay
// and stops it when the test ends.
func NewBunker(t testing.TB, cfg BunkerConfig) *Bunker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := StartBunker(ctx, cfg)
	if err != nil {
		t.Fatalf("nip46test: start bunker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// StartBunker starts a bunker and waits until it is subscribed on every
// relay (or ctx ends); the caller must Close it.
func StartBunker(ctx context.Context, cfg BunkerConfig) (*Bunker, error) {
	if len(cfg.Relays) == 0 {
		return nil, fmt.Errorf("nip46test: BunkerConfig.Relays is empty")
	}
	b := &Bunker{
		cfg:        cfg,
		user:       cfg.UserKey,
		signer:     cfg.SignerKey,
		start:      time.Now(),
		authorized: map[string]bool{},
		seen:       map[string][]*nostr.Event{},
		authed:     map[string]bool{},
	}
	if b.user == nil {
		k, err := nostr.NewSecretKey()
		if err != nil {
			return nil, err
		}
		b.user = k
	}
	if b.signer == nil {
		b.signer = b.user
	}
	signerPub := b.signer.PublicKey()
	since := b.start.Unix() - 10
	b.pool = relaypool.New(relaypool.Config{
		URLs: cfg.Relays,
		Filter: func() relaypool.Filter {
			return relaypool.Filter{
				Kinds: []int{KindNIP46},
				Tags:  map[string][]string{"p": {signerPub}},
				Since: &since,
			}
		},
		OnEvent:    func(_ string, ev *nostr.Event) { b.handle(ev) },
		Logger:     cfg.Logger,
		MinBackoff: 50 * time.Millisecond,
		MaxBackoff: time.Second,
	})
	for {
		if b.pool.Up() == len(cfg.Relays) {
			return b, nil
		}
		if err := b.pool.WaitUp(ctx, false); err != nil {
			b.Close()
			return nil, fmt.Errorf("nip46test: bunker could not reach its relays: %w", err)
		}
		if b.pool.Up() < len(cfg.Relays) {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				b.Close()
				return nil, fmt.Errorf("nip46test: bunker could not reach all its relays: %w", ctx.Err())
			}
		}
	}
}

// URL returns the bunker:// connection token for clients: the signer
// pubkey, every relay and the secret (if any).
func (b *Bunker) URL() string {
	q := url.Values{}
	for _, r := range b.cfg.Relays {
		q.Add("relay", r)
	}
	if b.cfg.Secret != "" {
		q.Set("secret", b.cfg.Secret)
	}
	return "bunker://" + b.signer.PublicKey() + "?" + q.Encode()
}

// UserPubkey returns the user's pubkey (hex): the key events are signed
// with.
func (b *Bunker) UserPubkey() string { return b.user.PublicKey() }

// SignerPubkey returns the remote-signer pubkey (hex).
func (b *Bunker) SignerPubkey() string { return b.signer.PublicKey() }

// Received returns the requests handled so far, in order.
func (b *Bunker) Received() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.received)
}

// Approve sends the real answers of every request held by an auth
// challenge.
func (b *Bunker) Approve() {
	b.mu.Lock()
	held := b.held
	b.held = nil
	b.mu.Unlock()
	for _, h := range held {
		b.publish(h.requestEvent, h.reply)
	}
}

// Close stops the bunker. It is idempotent.
func (b *Bunker) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	for _, t := range b.timers {
		t.Stop()
	}
	b.mu.Unlock()
	b.pool.Close()
}

type heldReply struct {
	requestEvent string
	reply        *nostr.Event
}

type request struct {
	ID     string   `json:"id"`
	Method string   `json:"method"`
	Params []string `json:"params"`
}

type response struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// handle answers one request event.
func (b *Bunker) handle(ev *nostr.Event) {
	if ev.Kind != KindNIP46 {
		return
	}
	nip04 := strings.Contains(ev.Content, "?iv=")
	if !nip04 && b.cfg.NIP04Only {
		return // cannot read NIP-44: ignore, like an old bunker
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	if sent, dup := b.seen[ev.ID]; dup {
		// The same request again (from another relay, or resent by a
		// client that reconnected): send the answers again, as the first
		// ones may have been lost; clients drop duplicates.
		sent = slices.Clone(sent)
		b.mu.Unlock()
		for _, r := range sent {
			b.publish(ev.ID, r)
		}
		return
	}
	b.seen[ev.ID] = nil
	b.mu.Unlock()

	plain, err := b.decrypt(ev.PubKey, ev.Content, nip04)
	if err != nil {
		return
	}
	var req request
	if err := json.Unmarshal([]byte(plain), &req); err != nil || req.ID == "" {
		return
	}
	b.mu.Lock()
	b.received = append(b.received, Request{Method: req.Method, Client: ev.PubKey, NIP04: nip04})
	b.mu.Unlock()

	result, errMsg := b.call(ev.PubKey, &req)
	reply, err := b.reply(ev.PubKey, nip04, response{ID: req.ID, Result: result, Error: errMsg})
	if err != nil {
		return
	}
	if errMsg == "" && b.needsAuth(req.Method) {
		challenge, err := b.reply(ev.PubKey, nip04, response{ID: req.ID, Result: "auth_url", Error: b.cfg.AuthURL})
		if err != nil {
			return
		}
		b.mu.Lock()
		b.held = append(b.held, heldReply{ev.ID, reply})
		if b.cfg.AuthDelay > 0 {
			b.timers = append(b.timers, time.AfterFunc(b.cfg.AuthDelay, b.Approve))
		}
		b.mu.Unlock()
		b.publish(ev.ID, challenge)
		return
	}
	b.publish(ev.ID, reply)
}

// needsAuth reports whether this request gets an auth challenge (the
// first request of a method in AuthFor), and records it.
func (b *Bunker) needsAuth(method string) bool {
	if b.cfg.AuthURL == "" || !slices.Contains(b.cfg.AuthFor, method) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.authed[method] {
		return false
	}
	b.authed[method] = true
	return true
}

// call runs one method; it returns the result or an error message.
func (b *Bunker) call(client string, req *request) (string, string) {
	if msg, ok := b.cfg.Reject[req.Method]; ok {
		return "", msg
	}
	if req.Method == "connect" {
		return b.connect(client, req.Params)
	}
	b.mu.Lock()
	ok := b.authorized[client]
	b.mu.Unlock()
	if !ok {
		return "", "unauthorized: send connect first"
	}
	p := req.Params
	switch req.Method {
	case "ping":
		return "pong", ""
	case "get_public_key":
		return b.user.PublicKey(), ""
	case "logout":
		b.mu.Lock()
		delete(b.authorized, client)
		b.mu.Unlock()
		return "ack", ""
	case "sign_event":
		if len(p) < 1 {
			return "", "sign_event: missing the event parameter"
		}
		var tmpl struct {
			Kind      *int       `json:"kind"`
			Content   string     `json:"content"`
			Tags      [][]string `json:"tags"`
			CreatedAt int64      `json:"created_at"`
		}
		if err := json.Unmarshal([]byte(p[0]), &tmpl); err != nil || tmpl.Kind == nil {
			return "", "sign_event: the parameter is not an event template"
		}
		ev := &nostr.Event{Kind: *tmpl.Kind, Content: tmpl.Content, Tags: tmpl.Tags, CreatedAt: tmpl.CreatedAt}
		if ev.Tags == nil {
			ev.Tags = [][]string{}
		}
		if err := nostr.SignEvent(b.user, ev); err != nil {
			return "", "sign_event: " + err.Error()
		}
		if b.cfg.TamperSignedEvent != nil {
			b.cfg.TamperSignedEvent(ev)
		}
		out, err := json.Marshal(ev)
		if err != nil {
			return "", "sign_event: " + err.Error()
		}
		return string(out), ""
	case "nip44_encrypt", "nip44_decrypt", "nip04_encrypt", "nip04_decrypt":
		if len(p) < 2 {
			return "", req.Method + ": want [<pubkey>, <text>]"
		}
		peer, err := nostr.ParsePublicKey(p[0])
		if err != nil {
			return "", req.Method + ": bad pubkey"
		}
		var out string
		switch req.Method {
		case "nip04_encrypt":
			out, err = nostr.Nip04Encrypt(b.user, peer, p[1])
		case "nip04_decrypt":
			out, err = nostr.Nip04Decrypt(b.user, peer, p[1])
		default:
			var ck [32]byte
			ck, err = nostr.ConversationKey(b.user, peer)
			if err == nil {
				if req.Method == "nip44_encrypt" {
					out, err = nostr.Nip44Encrypt(p[1], ck)
				} else {
					out, err = nostr.Nip44Decrypt(p[1], ck)
				}
				clear(ck[:])
			}
		}
		if err != nil {
			return "", req.Method + ": failed"
		}
		return out, ""
	}
	return "", fmt.Sprintf("unsupported method %q", clip(req.Method))
}

func (b *Bunker) connect(client string, p []string) (string, string) {
	if len(p) < 1 || p[0] != b.signer.PublicKey() {
		return "", "connect: the first parameter is not this remote signer's pubkey"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.authorized[client] {
		return "ack", ""
	}
	if b.cfg.Secret != "" {
		got := ""
		if len(p) >= 2 {
			got = p[1]
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(b.cfg.Secret)) != 1 {
			return "", "connect: invalid secret"
		}
		if b.cfg.SingleUseSecret {
			if b.secretUsed != "" && b.secretUsed != client {
				return "", "connect: this secret was already used"
			}
			b.secretUsed = client
		}
	}
	b.authorized[client] = true
	return "ack", ""
}

func (b *Bunker) decrypt(client, content string, nip04 bool) (string, error) {
	if nip04 {
		return nostr.Nip04Decrypt(b.signer, client, content)
	}
	ck, err := nostr.ConversationKey(b.signer, client)
	if err != nil {
		return "", err
	}
	defer clear(ck[:])
	return nostr.Nip44Decrypt(content, ck)
}

// reply builds the signed response event for a client.
func (b *Bunker) reply(client string, nip04 bool, r response) (*nostr.Event, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var content string
	if nip04 {
		content, err = nostr.Nip04Encrypt(b.signer, client, string(body))
	} else {
		var ck [32]byte
		ck, err = nostr.ConversationKey(b.signer, client)
		if err == nil {
			content, err = nostr.Nip44Encrypt(string(body), ck)
			clear(ck[:])
		}
	}
	if err != nil {
		return nil, err
	}
	ev := &nostr.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      KindNIP46,
		Tags:      [][]string{{"p", client}},
		Content:   content,
	}
	if err := nostr.SignEvent(b.signer, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// publish sends a reply to the request event reqID on every relay and
// records it for replays.
func (b *Bunker) publish(reqID string, ev *nostr.Event) {
	b.mu.Lock()
	closed := b.closed
	if !closed && !slices.Contains(b.seen[reqID], ev) {
		b.seen[reqID] = append(b.seen[reqID], ev)
	}
	b.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayWriteTimeout)
	defer cancel()
	_, _ = b.pool.Publish(ctx, ev)
}
