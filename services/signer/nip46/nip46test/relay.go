// Package nip46test provides a real NIP-01 relay and a real NIP-46
// remote signer ("bunker") for tests, both speaking websockets on
// 127.0.0.1. Nothing in it is mocked: the relay verifies ids and
// signatures and routes events by filter; the bunker signs and encrypts
// with the nostr package.
//
//	relay := nip46test.NewRelay(t)
//	bunker := nip46test.NewBunker(t, nip46test.BunkerConfig{
//		Relays: []string{relay.URL()}, Secret: "s3cret",
//	})
//	client, err := nip46.Dial(ctx, nip46.Config{BunkerURL: bunker.URL()})
package nip46test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46/internal/relaypool"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Relay is a small in-memory NIP-01 relay. It handles EVENT (checks the
// id and signature, answers OK true/false with a reason, stores the event
// unless it is ephemeral, fans it out to matching subscriptions), REQ
// (filters with ids, authors, kinds, #<letter> tags, since, until, limit;
// stored matches newest first, then EOSE, then live events) and CLOSE.
// Like real relays it does not store ephemeral events (kinds
// 20000-29999, which include NIP-46's 24133): they only reach
// subscriptions open when they arrive.
type Relay struct {
	srv *httptest.Server

	mu     sync.Mutex
	events []*nostr.Event
	ids    map[string]bool
	conns  map[*relayConn]struct{}
	closed bool
	// handlers tracks connection handlers, so that Close waits for them.
	handlers sync.WaitGroup
}

type relayConn struct {
	ws   *websocket.Conn
	mu   sync.Mutex
	subs map[string][]relaypool.Filter
}

// NewRelay starts a relay and closes it when the test ends.
func NewRelay(t testing.TB) *Relay {
	t.Helper()
	r, err := StartRelay()
	if err != nil {
		t.Fatalf("nip46test: start relay: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// StartRelay starts a relay on 127.0.0.1; the caller must Close it.
func StartRelay() (*Relay, error) {
	r := &Relay{ids: map[string]bool{}, conns: map[*relayConn]struct{}{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r, nil
}

// URL returns the relay's address, ws://127.0.0.1:<port>.
func (r *Relay) URL() string { return "ws" + strings.TrimPrefix(r.srv.URL, "http") }

// Close drops every connection and stops the server. It is idempotent.
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.DropConnections()
	r.srv.Close()
	r.handlers.Wait()
}

// DropConnections abruptly closes every open connection (no close
// handshake), as a network failure would; the relay keeps serving, so
// clients can reconnect. It returns how many connections it dropped.
func (r *Relay) DropConnections() int {
	r.mu.Lock()
	conns := make([]*relayConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.CloseNow()
	}
	return len(conns)
}

// Connections returns how many websocket connections are open.
func (r *Relay) Connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// Events returns copies of the stored events, oldest first.
func (r *Relay) Events() []nostr.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]nostr.Event, len(r.events))
	for i, e := range r.events {
		out[i] = *e
	}
	return out
}

func (r *Relay) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		http.Error(w, "relay closed", http.StatusServiceUnavailable)
		return
	}
	r.handlers.Add(1)
	r.mu.Unlock()
	defer r.handlers.Done()

	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	ws.SetReadLimit(relaypool.MaxMessage)
	c := &relayConn{ws: ws, subs: map[string][]relaypool.Filter{}}
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		_ = ws.CloseNow()
	}()
	for {
		_, data, err := ws.Read(context.Background())
		if err != nil {
			return
		}
		r.handle(c, data)
	}
}

func (c *relayConn) send(v ...any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayWriteTimeout)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageText, b)
}

func (r *Relay) handle(c *relayConn, data []byte) {
	var msg []json.RawMessage
	if err := json.Unmarshal(data, &msg); err != nil || len(msg) == 0 {
		c.send("NOTICE", "invalid: message is not a JSON array")
		return
	}
	var label string
	_ = json.Unmarshal(msg[0], &label)
	switch label {
	case "EVENT":
		if len(msg) != 2 {
			c.send("NOTICE", `invalid: EVENT wants ["EVENT", <event>]`)
			return
		}
		var ev nostr.Event
		if err := json.Unmarshal(msg[1], &ev); err != nil {
			c.send("NOTICE", "invalid: the event does not decode: "+err.Error())
			return
		}
		ok, reason := r.accept(&ev)
		c.send("OK", ev.ID, ok, reason)
	case "REQ":
		var subID string
		if len(msg) < 3 || json.Unmarshal(msg[1], &subID) != nil || subID == "" {
			c.send("NOTICE", `invalid: REQ wants ["REQ", <subscription id>, <filter>...]`)
			return
		}
		filters := make([]relaypool.Filter, 0, len(msg)-2)
		for _, raw := range msg[2:] {
			var f relaypool.Filter
			if err := json.Unmarshal(raw, &f); err != nil {
				c.send("CLOSED", subID, "unsupported: "+err.Error())
				return
			}
			filters = append(filters, f)
		}
		// Register before answering, so that no event falls between the
		// stored answer and the live ones.
		c.mu.Lock()
		c.subs[subID] = filters
		c.mu.Unlock()
		for _, ev := range r.query(filters) {
			c.send("EVENT", subID, ev)
		}
		c.send("EOSE", subID)
	case "CLOSE":
		var subID string
		if len(msg) < 2 || json.Unmarshal(msg[1], &subID) != nil {
			c.send("NOTICE", `invalid: CLOSE wants ["CLOSE", <subscription id>]`)
			return
		}
		c.mu.Lock()
		delete(c.subs, subID)
		c.mu.Unlock()
	default:
		c.send("NOTICE", fmt.Sprintf("unsupported: message type %q", clip(label)))
	}
}

// accept checks, stores and fans out an event; it returns the OK answer.
func (r *Relay) accept(ev *nostr.Event) (bool, string) {
	if err := nostr.VerifyEvent(ev); err != nil {
		return false, "invalid: " + strings.TrimPrefix(err.Error(), "nostr: verify: ")
	}
	ephemeral := ev.Kind >= 20000 && ev.Kind < 30000
	r.mu.Lock()
	if r.ids[ev.ID] {
		r.mu.Unlock()
		return true, "duplicate: already have this event"
	}
	if !ephemeral {
		r.ids[ev.ID] = true
		r.events = append(r.events, ev)
	}
	conns := make([]*relayConn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		var hits []string
		for id, filters := range c.subs {
			if matchAny(filters, ev) {
				hits = append(hits, id)
			}
		}
		c.mu.Unlock()
		for _, id := range hits {
			c.send("EVENT", id, ev)
		}
	}
	return true, ""
}

// query returns the stored events matching any filter, newest first,
// each filter bounded by its limit.
func (r *Relay) query(filters []relaypool.Filter) []*nostr.Event {
	r.mu.Lock()
	stored := slices.Clone(r.events)
	r.mu.Unlock()
	slices.SortStableFunc(stored, func(a, b *nostr.Event) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	seen := map[string]bool{}
	var out []*nostr.Event
	for _, f := range filters {
		n := 0
		for _, ev := range stored {
			if f.Limit != nil && n >= *f.Limit {
				break
			}
			if f.Match(ev) {
				n++
				if !seen[ev.ID] {
					seen[ev.ID] = true
					out = append(out, ev)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *nostr.Event) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

func matchAny(filters []relaypool.Filter, ev *nostr.Event) bool {
	for i := range filters {
		if filters[i].Match(ev) {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
