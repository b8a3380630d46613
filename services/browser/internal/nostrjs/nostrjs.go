// Package nostrjs is the page side of window.nostr (NIP-07): the script the
// browser worker runs in every frame of a session that has a Nostr
// identity, and the wire format between that script and the worker.
//
// The script calls a CDP binding (Runtime.addBinding) with a JSON Request;
// the worker answers by calling ReplyFunction in the execution context
// the call came from (Runtime.callFunctionOn). See nostr.js.
package nostrjs

import (
	_ "embed"
	"encoding/json"
	"strconv"
	"strings"
)

//go:embed nostr.js
var script string

// Limits shared by the script and the worker.
const (
	// MaxRequest bounds one call's JSON (the script counts UTF-16 code
	// units, the worker bytes).
	MaxRequest = 256 << 10
	// MaxPending bounds the calls in flight (the script per document,
	// the worker per session).
	MaxPending = 16
)

// Source returns the script for a session whose binding and reply
// function have the names given (JavaScript identifiers).
func Source(binding, reply string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return strings.NewReplacer(
		"__BINDING__", q(binding),
		"__REPLY__", q(reply),
		"__MAX__", strconv.Itoa(MaxRequest),
		"__MAX_PENDING__", strconv.Itoa(MaxPending),
	).Replace(script)
}

// Request is one call as the script sends it through the binding.
type Request struct {
	// Token is the calling document's random token; the reply must carry
	// it back.
	Token string `json:"t"`
	// ID numbers the call in its document.
	ID int64 `json:"i"`
	// Method is getPublicKey, signEvent, nip04.encrypt, nip04.decrypt,
	// nip44.encrypt or nip44.decrypt.
	Method string `json:"m"`
	// Params are the method's arguments: {} for getPublicKey, an Event
	// for signEvent, a Crypt for the others.
	Params json.RawMessage `json:"p"`
}

// Event is signEvent's argument, as the script checked it.
type Event struct {
	Kind      int64      `json:"kind"`
	CreatedAt int64      `json:"created_at"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
}

// Crypt is the argument of the nip04 and nip44 methods.
type Crypt struct {
	Pubkey string `json:"pubkey"`
	Text   string `json:"text"`
}

// The kinds of reply (ReplyFunction's third argument).
const (
	ReplyOK     = "ok"     // value: the result
	ReplyError  = "error"  // value: the message the promise rejects with
	ReplyLogout = "logout" // to every document: reject all calls, now and later
)

// ReplyFunction is the function declaration the worker calls in a
// document (Runtime.callFunctionOn with that document's execution context)
// with the arguments token, id, kind and value. It names the reply
// function as a global: the script made it a property that the page can
// neither replace nor shadow with a declaration of its own.
func ReplyFunction(reply string) string {
	return "function (t, i, k, v) { " + reply + "(t, i, k, v); }"
}
