package nip46

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// BunkerURL is a parsed bunker:// connection token (NIP-46, connection
// initiated by the remote signer). Printing it (String, GoString, slog)
// never shows the secret.
type BunkerURL struct {
	// RemoteSignerPubkey is the remote signer's pubkey, 64 lowercase hex.
	// It may differ from the user's pubkey.
	RemoteSignerPubkey string
	// Relays are the relay URLs (ws:// or wss://), without duplicates,
	// in the order given.
	Relays []string
	// Secret is the optional connection secret; never log it.
	Secret string
}

// ParseBunkerURL parses
// bunker://<remote-signer-pubkey>?relay=wss://…&relay=…&secret=… .
// The pubkey is 64 hex characters (an npub is accepted too); at least
// one relay is required and each must be a ws:// or wss:// URL; secret is
// optional; other parameters are ignored. Errors wrap ErrBadURL, say what
// is wrong, and never contain the secret.
func ParseBunkerURL(s string) (*BunkerURL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: it is empty; want bunker://<remote-signer-pubkey>?relay=wss://…", ErrBadURL)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !strings.EqualFold(scheme, "bunker") {
		if strings.EqualFold(scheme, "nostrconnect") {
			return nil, fmt.Errorf("%w: this is a nostrconnect:// token, which the remote signer reads; give the client the remote signer's bunker:// URL", ErrBadURL)
		}
		return nil, fmt.Errorf("%w: it does not start with bunker:// (want bunker://<remote-signer-pubkey>?relay=wss://…)", ErrBadURL)
	}
	// Parse the query by hand rather than with url.Parse, whose errors
	// quote the whole URL, secret included.
	hostPath, rawQuery, _ := strings.Cut(rest, "?")
	hostPath, _, _ = strings.Cut(hostPath, "#")
	rawQuery, _, _ = strings.Cut(rawQuery, "#")
	pk := strings.TrimSuffix(hostPath, "/")
	if pk == "" {
		return nil, fmt.Errorf("%w: the remote signer pubkey is missing after bunker://", ErrBadURL)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// The error would quote the bad escape, which may be in the secret.
		return nil, fmt.Errorf("%w: the part after \"?\" is not a valid query string (check for bad %%-escapes)", ErrBadURL)
	}
	secrets := q["secret"]
	if len(secrets) > 1 {
		return nil, fmt.Errorf("%w: it has %d secret parameters, want at most one", ErrBadURL, len(secrets))
	}
	b := &BunkerURL{}
	if len(secrets) == 1 {
		b.Secret = secrets[0]
	}
	pub, err := nostr.ParsePublicKey(pk)
	if err != nil {
		return nil, fmt.Errorf("%w: the remote signer pubkey is not valid (want 64 hex characters): %s", ErrBadURL, redact(strings.TrimPrefix(err.Error(), "nostr: "), b.Secret))
	}
	b.RemoteSignerPubkey = pub
	relays := q["relay"]
	if len(relays) == 0 {
		return nil, fmt.Errorf("%w: it names no relay; add relay=wss://… parameters", ErrBadURL)
	}
	for _, r := range relays {
		r = strings.TrimSpace(r)
		if err := checkRelay(r); err != nil {
			return nil, fmt.Errorf("%w: relay %q %s", ErrBadURL, redact(r, b.Secret), err.Error())
		}
		if !slices.Contains(b.Relays, r) {
			b.Relays = append(b.Relays, r)
		}
	}
	return b, nil
}

// checkRelay checks that r is a ws:// or wss:// URL with a host; the
// error completes "relay %q …".
func checkRelay(r string) error {
	u, err := url.Parse(r)
	if err != nil {
		return fmt.Errorf("is not a valid URL")
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return fmt.Errorf("is not a websocket URL: want ws:// or wss://")
	}
	if u.Host == "" {
		return fmt.Errorf("has no host")
	}
	return nil
}

// redact replaces the secret in s, if it appears.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[secret]")
}

// String returns the token with the secret replaced by "[redacted]".
func (b BunkerURL) String() string {
	var sb strings.Builder
	sb.WriteString("bunker://")
	sb.WriteString(b.RemoteSignerPubkey)
	sep := "?"
	for _, r := range b.Relays {
		sb.WriteString(sep + "relay=" + url.QueryEscape(r))
		sep = "&"
	}
	if b.Secret != "" {
		sb.WriteString(sep + "secret=[redacted]")
	}
	return sb.String()
}

// GoString is String, so that %#v does not show the secret either.
func (b BunkerURL) GoString() string { return b.String() }

// LogValue makes log/slog print the redacted token.
func (b BunkerURL) LogValue() slog.Value { return slog.StringValue(b.String()) }
