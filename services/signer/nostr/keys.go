package nostr

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// redacted is what a SecretKey prints as, whatever the verb.
const redacted = "[secret key]"

// SecretKey is a secp256k1 private key: 32 bytes, a scalar in [1, n-1].
// It never prints its value: String, GoString, Format (every fmt verb),
// LogValue and MarshalJSON all give "[secret key]". Wipe zeroes it; a
// wiped key signs and encrypts nothing. Pass it by pointer: a copy would
// escape Wipe.
type SecretKey struct {
	b     [32]byte
	wiped bool
}

// NewSecretKey returns a fresh random secret key from crypto/rand.
func NewSecretKey() (*SecretKey, error) {
	for {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("nostr: reading random bytes for a new key: %w", err)
		}
		k, err := SecretKeyFromBytes(b[:])
		clear(b[:])
		if err == nil {
			return k, nil
		}
		// Out of range (probability about 2^-128): draw again.
	}
}

// SecretKeyFromBytes makes a SecretKey from 32 raw bytes (copied; the
// caller should clear its slice). It fails if the length is not 32 or the
// number is 0 or not below the secp256k1 group order.
func SecretKeyFromBytes(b []byte) (*SecretKey, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("nostr: a secret key is 32 bytes, got %d", len(b))
	}
	k := &SecretKey{}
	copy(k.b[:], b)
	if err := k.check(); err != nil {
		k.Wipe()
		return nil, err
	}
	return k, nil
}

// check reports whether the key is a scalar in [1, n-1].
func (k *SecretKey) check() error {
	var s btcec.ModNScalar
	overflow := s.SetBytes(&k.b)
	zero := s.IsZero()
	s.Zero()
	if overflow != 0 {
		return errors.New("nostr: secret key is out of range: it is not below the secp256k1 group order")
	}
	if zero {
		return errors.New("nostr: secret key is out of range: it is zero")
	}
	return nil
}

// ParseSecretKey parses an nsec1… bech32 string (NIP-19) or 64 hex
// characters. Surrounding white space is ignored. Errors never contain
// the key.
func ParseSecretKey(s string) (*SecretKey, error) {
	s = strings.TrimSpace(s)
	if hasPrefixFold(s, "nsec1") {
		prefix, data, err := bech32Decode(s)
		if err != nil {
			return nil, fmt.Errorf("nostr: secret key: %w", err)
		}
		defer clear(data)
		if prefix != "nsec" {
			return nil, fmt.Errorf("nostr: secret key: wrong prefix %q, want \"nsec\"", prefix)
		}
		if len(data) != 32 {
			return nil, fmt.Errorf("nostr: secret key: nsec holds %d bytes, want 32", len(data))
		}
		return SecretKeyFromBytes(data)
	}
	if i := strings.Index(s, "1"); i > 0 && isBech32Prefix(s[:i]) && len(s) != 64 {
		// A mistyped hex key can look like a bech32 prefix ("deadbeef1…"):
		// quote the prefix only when it cannot be part of a hex key.
		if strings.Trim(strings.ToLower(s[:i]), "0123456789abcdef") == "" {
			return nil, fmt.Errorf("nostr: secret key: want an nsec1… string or 64 hex characters, got %d characters", len(s))
		}
		return nil, fmt.Errorf("nostr: secret key: wrong prefix %q, want an nsec1… string or 64 hex characters", strings.ToLower(s[:i]))
	}
	if len(s) != 64 {
		return nil, fmt.Errorf("nostr: secret key: wrong length: want an nsec1… string or 64 hex characters, got %d characters", len(s))
	}
	var b [32]byte
	defer clear(b[:])
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return nil, errors.New("nostr: secret key: 64 characters but not hex (want 0-9, a-f)")
	}
	return SecretKeyFromBytes(b[:])
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// isBech32Prefix reports whether p looks like a NIP-19 human-readable
// part (letters only), to tell "npub1…" given as a secret key from a hex
// string of the wrong length.
func isBech32Prefix(p string) bool {
	if len(p) < 2 || len(p) > 16 {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// Wipe zeroes the key. Afterwards PublicKey returns "" and every
// operation with the key fails.
func (k *SecretKey) Wipe() {
	if k == nil {
		return
	}
	clear(k.b[:])
	k.wiped = true
}

// Wiped reports whether Wipe was called.
func (k *SecretKey) Wiped() bool { return k == nil || k.wiped }

// ErrKeyWiped is returned by operations on a wiped (or nil) key.
var ErrKeyWiped = errors.New("nostr: the secret key has been wiped (or is nil)")

// privKey returns the btcec form of the key; the caller must Zero it.
func (k *SecretKey) privKey() (*btcec.PrivateKey, error) {
	if k.Wiped() {
		return nil, ErrKeyWiped
	}
	priv, _ := btcec.PrivKeyFromBytes(k.b[:])
	return priv, nil
}

// PublicKey returns the key's BIP-340 x-only public key as 64 lowercase
// hex characters, or "" for a wiped key.
func (k *SecretKey) PublicKey() string {
	priv, err := k.privKey()
	if err != nil {
		return ""
	}
	defer priv.Zero()
	return hex.EncodeToString(schnorr.SerializePubKey(priv.PubKey()))
}

// Equal reports whether two keys hold the same secret (in constant time).
func (k *SecretKey) Equal(o *SecretKey) bool {
	if k.Wiped() || o.Wiped() {
		return false
	}
	var d byte
	for i := range k.b {
		d |= k.b[i] ^ o.b[i]
	}
	return d == 0
}

// String returns "[secret key]".
func (k *SecretKey) String() string { return redacted }

// GoString returns "[secret key]", for %#v.
func (k *SecretKey) GoString() string { return redacted }

// Format prints "[secret key]" for every verb (%v, %s, %x, %q, %d …).
func (k *SecretKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue makes log/slog print "[secret key]".
func (k *SecretKey) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes the key as the string "[secret key]": a key is
// never serialised by accident.
func (k *SecretKey) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[secret key]", for encoders that use it.
func (k *SecretKey) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// ParsePublicKey parses an npub1… bech32 string (NIP-19) or 64 hex
// characters (either case) and returns the key as 64 lowercase hex
// characters. It checks that the key is the x coordinate of a point on
// secp256k1 (BIP-340 lift_x).
func ParsePublicKey(s string) (string, error) {
	s = strings.TrimSpace(s)
	var b []byte
	switch {
	case hasPrefixFold(s, "npub1"):
		prefix, data, err := bech32Decode(s)
		if err != nil {
			return "", fmt.Errorf("nostr: public key: %w", err)
		}
		if prefix != "npub" {
			return "", fmt.Errorf("nostr: public key: wrong prefix %q, want \"npub\"", prefix)
		}
		if len(data) != 32 {
			return "", fmt.Errorf("nostr: public key: npub holds %d bytes, want 32", len(data))
		}
		b = data
	case hasPrefixFold(s, "nsec1"):
		// Never echo what looks like a secret key.
		return "", errors.New("nostr: public key: got an nsec (a secret key), want an npub1… string or 64 hex characters")
	default:
		if i := strings.Index(s, "1"); i > 0 && isBech32Prefix(s[:i]) && len(s) != 64 {
			return "", fmt.Errorf("nostr: public key: wrong prefix %q, want an npub1… string or 64 hex characters", strings.ToLower(s[:i]))
		}
		if len(s) != 64 {
			return "", fmt.Errorf("nostr: public key: wrong length: want an npub1… string or 64 hex characters, got %d characters", len(s))
		}
		var err error
		if b, err = hex.DecodeString(s); err != nil {
			return "", errors.New("nostr: public key: 64 characters but not hex (want 0-9, a-f)")
		}
	}
	if _, err := schnorr.ParsePubKey(b); err != nil {
		return "", fmt.Errorf("nostr: public key %x is not a point on secp256k1", b)
	}
	return hex.EncodeToString(b), nil
}

// parsePoint turns 64 hex characters into a curve point (even y).
func parsePoint(what, pubHex string) (*btcec.PublicKey, error) {
	if len(pubHex) != 64 {
		return nil, fmt.Errorf("nostr: %s must be 64 hex characters, got %d", what, len(pubHex))
	}
	b, err := hex.DecodeString(pubHex)
	if err != nil {
		return nil, fmt.Errorf("nostr: %s is not hex", what)
	}
	p, err := schnorr.ParsePubKey(b)
	if err != nil {
		return nil, fmt.Errorf("nostr: %s %s is not a point on secp256k1", what, pubHex)
	}
	return p, nil
}
