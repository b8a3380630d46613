package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/nostrjs"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/signerbus"
)

// The errors a page sees without asking the signer.
var (
	errLoggedOut = nostrErrorf("logged out")
	errTooMany   = nostrErrorf("too many pending window.nostr calls (at most %d per session); wait for some to finish", nostrjs.MaxPending)
)

// nostrErrorf is an error for a page, with the window.nostr prefix.
func nostrErrorf(format string, args ...any) error {
	return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "window.nostr: "+format, args...)
}

// pageMessage is the message a page's promise rejects with: the
// signer's own (it names the origin and what was asked, never a payload),
// behind the window.nostr prefix.
func pageMessage(err error) string {
	msg := err.Error()
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_UNAVAILABLE:
		msg = "the signer is not reachable (" + msg + ")"
	case commonv1.ErrorCode_TIMEOUT:
		msg = "the signer did not answer in time (" + msg + ")"
	}
	if !strings.HasPrefix(msg, "window.nostr") {
		msg = "window.nostr: " + msg
	}
	return msg
}

// signedEvent is signEvent's result as the page gets it (NIP-01 fields).
type signedEvent struct {
	ID        string     `json:"id"`
	Pubkey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int64      `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// call asks the signer what req asks, for a frame of origin in a tab whose
// top-level frame has origin top. It returns the value the promise
// resolves with, and the event kind for the log (-1 when not signing).
// The request's texts (event content, plaintexts, ciphertexts) go to the
// signer only: never into an error or a log record.
func (b *nostrBridge) call(ctx context.Context, req *nostrjs.Request, origin, top string) (value any, kind int64, err error) {
	kind = -1
	switch req.Method {
	case "getPublicKey":
		res, err := signerbus.GetPublicKey.Call(ctx, b.bus, &signerv1.GetPublicKey{Scope: b.scope, Origin: origin, TopOrigin: top})
		if err != nil {
			return nil, kind, err
		}
		return res.GetPubkey(), kind, nil
	case "signEvent":
		ev, err := parseEvent(req.Params)
		if err != nil {
			return nil, kind, err
		}
		kind = ev.Kind
		in := &signerv1.UnsignedEvent{Kind: ev.Kind, CreatedAt: ev.CreatedAt, Content: ev.Content, Tags: make([]*signerv1.Tag, 0, len(ev.Tags))}
		for _, t := range ev.Tags {
			in.Tags = append(in.Tags, &signerv1.Tag{Values: t})
		}
		res, err := signerbus.SignEvent.Call(ctx, b.bus, &signerv1.SignEvent{Scope: b.scope, Origin: origin, TopOrigin: top, Event: in})
		if err != nil {
			return nil, kind, err
		}
		out := signedEvent{ID: res.GetId(), Pubkey: res.GetPubkey(), CreatedAt: res.GetCreatedAt(), Kind: res.GetKind(),
			Tags: make([][]string, 0, len(res.GetTags())), Content: res.GetContent(), Sig: res.GetSig()}
		for _, t := range res.GetTags() {
			out.Tags = append(out.Tags, append([]string{}, t.GetValues()...))
		}
		return out, kind, nil
	case "nip04.encrypt", "nip04.decrypt", "nip44.encrypt", "nip44.decrypt":
		c, err := parseCrypt(req.Method, req.Params)
		if err != nil {
			return nil, kind, err
		}
		scheme := signerv1.Scheme_SCHEME_NIP44
		if strings.HasPrefix(req.Method, "nip04.") {
			scheme = signerv1.Scheme_SCHEME_NIP04
		}
		if strings.HasSuffix(req.Method, ".encrypt") {
			res, err := signerbus.Encrypt.Call(ctx, b.bus, &signerv1.Encrypt{Scope: b.scope, Origin: origin, TopOrigin: top,
				Scheme: scheme, PeerPubkey: c.Pubkey, Text: c.Text})
			return res.GetText(), kind, err
		}
		res, err := signerbus.Decrypt.Call(ctx, b.bus, &signerv1.Decrypt{Scope: b.scope, Origin: origin, TopOrigin: top,
			Scheme: scheme, PeerPubkey: c.Pubkey, Text: c.Text})
		return res.GetText(), kind, err
	}
	return nil, kind, nostrErrorf("unknown method: window.nostr has getPublicKey, signEvent, getRelays, nip04.encrypt/decrypt and nip44.encrypt/decrypt")
}

// parseEvent reads and checks signEvent's argument (the page script
// checked it too; a page may call the binding itself).
func parseEvent(raw json.RawMessage) (*nostrjs.Event, error) {
	var ev nostrjs.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, nostrErrorf("signEvent: the event must be {kind: integer, created_at: integer, tags: array of arrays of strings, content: string}: %s", jsonProblem(err))
	}
	if ev.Kind < 0 || ev.Kind > 65535 {
		return nil, nostrErrorf("signEvent: kind must be an integer from 0 to 65535, not %d", ev.Kind)
	}
	if ev.CreatedAt < 0 {
		return nil, nostrErrorf("signEvent: created_at must be a Unix time in seconds, not %d", ev.CreatedAt)
	}
	for i, t := range ev.Tags {
		if t == nil {
			return nil, nostrErrorf("signEvent: tags[%d] must be an array of strings, not null", i)
		}
	}
	return &ev, nil
}

// parseCrypt reads and checks the arguments of the nip04 and nip44
// methods.
func parseCrypt(method string, raw json.RawMessage) (*nostrjs.Crypt, error) {
	var c nostrjs.Crypt
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nostrErrorf("%s: the arguments must be (pubkey: string, text: string): %s", method, jsonProblem(err))
	}
	if len(c.Pubkey) != 64 || !isHexKey(strings.ToLower(c.Pubkey)) {
		return nil, nostrErrorf("%s: pubkey must be a public key of 64 hex characters", method)
	}
	return &c, nil
}

// jsonProblem says what was wrong with a call's JSON without quoting it
// (it may hold a plaintext).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "it is not valid JSON"
	}
	got, _, _ := strings.Cut(te.Value, " ") // "number 1.5": the type only
	where := "the value"
	if te.Field != "" {
		where = te.Field
	}
	return fmt.Sprintf("%s has a JSON %s where %s is expected", where, got, jsonKind(te.Type))
}

// jsonKind names what a Go type holds in JSON terms.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
