package nip46_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/signer/nip46"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

const testSecret = "hunter2-very-secret"

func testPubkey(t *testing.T) string {
	t.Helper()
	k, err := nostr.NewSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

func TestParseBunkerURL(t *testing.T) {
	t.Parallel()
	pk := testPubkey(t)
	npub, err := nostr.EncodeNpub(pk)
	if err != nil {
		t.Fatal(err)
	}
	good := []struct {
		name, in string
		relays   []string
		secret   string
	}{
		{"one relay and secret", "bunker://" + pk + "?relay=wss%3A%2F%2Frelay.example.com&secret=" + testSecret, []string{"wss://relay.example.com"}, testSecret},
		{"unescaped relays, duplicates dropped", "bunker://" + pk + "?relay=wss://a.example&relay=ws://127.0.0.1:7777&relay=wss://a.example", []string{"wss://a.example", "ws://127.0.0.1:7777"}, ""},
		{"trailing slash and upper-case hex", "  bunker://" + strings.ToUpper(pk) + "/?relay=wss://a.example&name=x  ", []string{"wss://a.example"}, ""},
		{"npub accepted", "bunker://" + npub + "?relay=wss://a.example&secret=s", []string{"wss://a.example"}, "s"},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			b, err := nip46.ParseBunkerURL(tc.in)
			if err != nil {
				t.Fatalf("ParseBunkerURL(%q) error: %v", tc.in, err)
			}
			if b.RemoteSignerPubkey != pk || !slices.Equal(b.Relays, tc.relays) || b.Secret != tc.secret {
				t.Errorf("ParseBunkerURL(%q) = %+v (secret %q), want pubkey %s relays %v secret %q", tc.in, b, b.Secret, pk, tc.relays, tc.secret)
			}
		})
	}

	bad := []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"not bunker", "https://" + pk + "?relay=wss://a.example&secret=" + testSecret, "does not start with bunker://"},
		{"nostrconnect", "nostrconnect://" + pk + "?relay=wss://a.example&secret=" + testSecret, "nostrconnect://"},
		{"no pubkey", "bunker://?relay=wss://a.example&secret=" + testSecret, "pubkey is missing"},
		{"short pubkey", "bunker://abcd?relay=wss://a.example&secret=" + testSecret, "remote signer pubkey is not valid"},
		{"pubkey not hex", "bunker://" + strings.Repeat("z", 64) + "?relay=wss://a.example&secret=" + testSecret, "not hex"},
		{"pubkey not on curve", "bunker://" + strings.Repeat("f", 64) + "?relay=wss://a.example&secret=" + testSecret, "not a point"},
		{"secret as pubkey", "bunker://" + testSecret + "?relay=wss://a.example&secret=" + testSecret, "remote signer pubkey is not valid"},
		{"no relay", "bunker://" + pk + "?secret=" + testSecret, "names no relay"},
		{"relay not websocket", "bunker://" + pk + "?relay=https://a.example&secret=" + testSecret, "not a websocket URL"},
		{"relay without host", "bunker://" + pk + "?relay=wss://&secret=" + testSecret, "has no host"},
		{"bad escape", "bunker://" + pk + "?relay=wss://a.example&secret=" + testSecret + "%zz", "not a valid query string"},
		{"two secrets", "bunker://" + pk + "?relay=wss://a.example&secret=" + testSecret + "&secret=" + testSecret, "2 secret parameters"},
		{"secret inside the relay", "bunker://" + pk + "?relay=" + testSecret + "&secret=" + testSecret, "not a websocket URL"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			b, err := nip46.ParseBunkerURL(tc.in)
			if err == nil {
				t.Fatalf("ParseBunkerURL(%q) = %v, want an error", tc.in, b)
			}
			if !errors.Is(err, nip46.ErrBadURL) {
				t.Errorf("ParseBunkerURL(%q) error %v is not ErrBadURL", tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseBunkerURL(%q) error %q, want it to contain %q", tc.in, err, tc.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("ParseBunkerURL(%q) error %q contains the secret", tc.in, err)
			}
		})
	}
}

func TestBunkerURLRedactsSecret(t *testing.T) {
	t.Parallel()
	pk := testPubkey(t)
	b, err := nip46.ParseBunkerURL("bunker://" + pk + "?relay=wss://a.example&secret=" + testSecret)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "bunker", b, "value", *b)
	outs := map[string]string{
		"String": b.String(),
		"%v":     fmt.Sprintf("%v", b),
		"%+v":    fmt.Sprintf("%+v", *b),
		"%#v":    fmt.Sprintf("%#v", *b),
		"%s":     fmt.Sprintf("%s", b), //lint:ignore S1025 the %s verb itself is under test
		"slog":   logged.String(),
	}
	for name, out := range outs {
		if strings.Contains(out, testSecret) {
			t.Errorf("%s shows the secret: %s", name, out)
		}
		if !strings.Contains(out, "secret=[redacted]") || !strings.Contains(out, pk) {
			t.Errorf("%s = %q, want the pubkey and secret=[redacted]", name, out)
		}
	}
}
