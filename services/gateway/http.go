package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/state"
)

// envelope is what the HTTP stack needs of a POSTed JSON-RPC message,
// decoded once at the edge (readBody) and handed down in the request's
// context: the method, and the request's _meta (trace context, protocol
// version).
type envelope struct {
	Method string `json:"method"`
	Params struct {
		Meta map[string]any `json:"_meta"`
	} `json:"params"`
}

type envelopeKey struct{}

// envelopeOf returns the envelope readBody decoded (nil for none: not a
// POST, or not a JSON object).
func envelopeOf(r *http.Request) *envelope {
	e, _ := r.Context().Value(envelopeKey{}).(*envelope)
	return e
}

// requestMeta is the _meta of r's message (otelmcp's trace context).
func requestMeta(r *http.Request) map[string]any {
	if e := envelopeOf(r); e != nil {
		return e.Params.Meta
	}
	return nil
}

// readBody answers 413 to a body larger than max; otherwise it reads the
// body once, decodes its envelope, and hands the next handler both.
func readBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		tooLarge := func() {
			http.Error(w, fmt.Sprintf("request body too large: the limit is %d bytes", max), http.StatusRequestEntityTooLarge)
		}
		if r.ContentLength > max {
			tooLarge()
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if int64(len(body)) > max {
			tooLarge()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		var e envelope
		if json.Unmarshal(body, &e) == nil { // the transport answers malformed JSON
			r = r.WithContext(context.WithValue(r.Context(), envelopeKey{}, &e))
		}
		next.ServeHTTP(w, r)
	})
}

// sessionCheck fills gaps of the transport for protocol sessions
// (2025-xx): a request other than initialize must carry Mcp-Session-Id (400
// without), and GET and DELETE must name a live session (404 otherwise; the
// transport itself validates POSTs only).
func (g *Gateway) sessionCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(server.HeaderKeySessionID)
		switch r.Method {
		case http.MethodPost:
			if id == "" && needsSession(r) {
				http.Error(w, "Bad Request: Mcp-Session-Id header is required (send initialize first to get one)", http.StatusBadRequest)
				return
			}
		case http.MethodGet, http.MethodDelete:
			if id == "" {
				http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
				return
			}
			terminated, err := g.sessions.manager(r).Validate(id)
			if err != nil {
				http.Error(w, "Not Found: unknown MCP session; initialize a new one", http.StatusNotFound)
				return
			}
			if terminated {
				http.Error(w, "Not Found: the MCP session was terminated; initialize a new one", http.StatusNotFound)
				return
			}
			if r.Method == http.MethodGet {
				// An open stream keeps the session's browser session.
				defer g.capacity.Stream(state.KeyOf(state.MCP, id))()
				// End the stream when the session ends, on whichever replica.
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				if ended, err := g.store.Ended(ctx, state.MCP, id); err == nil {
					go func() {
						select {
						case <-ended:
							cancel()
						case <-ctx.Done():
						}
					}()
				}
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// needsSession reports whether a POST is a legacy message other than
// initialize.
func needsSession(r *http.Request) bool {
	e := envelopeOf(r)
	if e == nil {
		return false // the transport answers malformed JSON
	}
	if v, _ := e.Params.Meta[mcp.MetaKeyProtocolVersion].(string); mcp.IsModernProtocol(v) {
		return false
	}
	return e.Method != string(mcp.MethodInitialize)
}
