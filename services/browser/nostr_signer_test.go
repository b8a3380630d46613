package browser

import (
	"encoding/json"
	"strings"
	"testing"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// TestParseNostrArgs: the worker checks what the page script checked
// (a page may call the binding itself), and its messages never quote a
// text that may be secret.
func TestParseNostrArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params, want string
	}{
		{`{"kind":1,"created_at":0,"tags":[["t","x"]],"content":"hi"}`, ""},
		{`{"kind":70000,"tags":[],"content":""}`, "kind must be an integer from 0 to 65535, not 70000"},
		{`{"kind":-1,"tags":[],"content":""}`, "kind must be an integer from 0 to 65535, not -1"},
		{`{"kind":1.5,"tags":[],"content":""}`, "kind has a JSON number where an integer is expected"},
		{`{"kind":1,"created_at":-5,"tags":[],"content":""}`, "created_at must be a Unix time in seconds, not -5"},
		{`{"kind":1,"tags":[["e",7]],"content":""}`, "tags has a JSON number where a string is expected"},
		{`{"kind":1,"tags":[null],"content":""}`, "tags[0] must be an array of strings, not null"},
		{`{"kind":1,"tags":[],"content":{"secret":"do not quote me"}}`, "content has a JSON object where a string is expected"},
		{`[1,2]`, "the event must be {kind: integer, created_at: integer, tags: array of arrays of strings, content: string}: the value has a JSON array where an object is expected"},
		{`{"kind":`, "it is not valid JSON"},
	} {
		_, err := parseEvent(json.RawMessage(tc.params))
		if tc.want == "" {
			if err != nil {
				t.Errorf("parseEvent(%s) = %v, want ok", tc.params, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "window.nostr: signEvent: ") || strings.Contains(err.Error(), "do not quote") {
			t.Errorf("parseEvent(%s) = %v, want an error containing %q", tc.params, err, tc.want)
		}
	}
	key := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		params, want string
	}{
		{`{"pubkey":"` + key + `","text":"hi"}`, ""},
		{`{"pubkey":"` + strings.ToUpper(key) + `","text":"hi"}`, ""},
		{`{"pubkey":"npub1xyz","text":"hi"}`, "nip44.encrypt: pubkey must be a public key of 64 hex characters"},
		{`{"pubkey":"` + key + `","text":["plaintext"]}`, "text has a JSON array where a string is expected"},
	} {
		_, err := parseCrypt("nip44.encrypt", json.RawMessage(tc.params))
		if (tc.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "plaintext"))) {
			t.Errorf("parseCrypt(%s) = %v, want %q", tc.params, err, tc.want)
		}
	}
}

func TestPageMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "signing a kind 0 event for https://x.example needs approval"), "window.nostr: signing a kind 0 event for https://x.example needs approval"},
		{bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "no service answers on sov.signer.sign_event"), "window.nostr: the signer is not reachable (no service answers on sov.signer.sign_event)"},
		{errLoggedOut, "window.nostr: logged out"},
	} {
		if got := pageMessage(tc.err); got != tc.want {
			t.Errorf("pageMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
