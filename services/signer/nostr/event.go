package nostr

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// Event is a Nostr event (NIP-01).
type Event struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// MarshalJSON encodes the event as NIP-01 wants it on the wire: nil Tags
// become [] (relays reject "tags":null).
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	for i, t := range e.Tags {
		if t == nil {
			e.Tags = append([][]string(nil), e.Tags...)
			e.Tags[i] = []string{}
		}
	}
	return json.Marshal(plain(e))
}

// Serialize returns the NIP-01 canonical form whose SHA-256 is the event
// id: [0,<pubkey>,<created_at>,<kind>,<tags>,<content>], with no white
// space, and strings escaped exactly as NIP-01 says: \n \" \\ \r \t \b \f
// and every other character (including other control characters and
// non-ASCII) verbatim.
func (e *Event) Serialize() []byte {
	n := 32 + len(e.PubKey) + len(e.Content)
	for _, t := range e.Tags {
		for _, s := range t {
			n += len(s) + 3
		}
		n += 3
	}
	b := make([]byte, 0, n+n/16)
	b = append(b, `[0,`...)
	b = appendString(b, e.PubKey)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.CreatedAt, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Kind), 10)
	b = append(b, ",["...)
	for i, t := range e.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, s := range t {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, "],"...)
	b = appendString(b, e.Content)
	b = append(b, ']')
	return b
}

// appendString appends s as a JSON string with NIP-01's escaping.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		var esc byte
		switch s[i] {
		case '\n':
			esc = 'n'
		case '"':
			esc = '"'
		case '\\':
			esc = '\\'
		case '\r':
			esc = 'r'
		case '\t':
			esc = 't'
		case '\b':
			esc = 'b'
		case '\f':
			esc = 'f'
		default:
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\', esc)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ComputeID returns the event id: the SHA-256 of Serialize, as 64
// lowercase hex characters.
func (e *Event) ComputeID() string {
	sum := sha256.Sum256(e.Serialize())
	return hex.EncodeToString(sum[:])
}

// VerifyEvent checks an event: its id is the hash of its content, its
// pubkey is a point on secp256k1, and its sig is a valid BIP-340
// signature of the id by that pubkey. The error says which check failed.
func VerifyEvent(e *Event) error {
	if e == nil {
		return errors.New("nostr: verify: no event")
	}
	if !isLowerHex(e.ID, 64) {
		return fmt.Errorf("nostr: verify: event id %q is not 64 lowercase hex characters", clip(e.ID))
	}
	if want := e.ComputeID(); e.ID != want {
		return fmt.Errorf("nostr: verify: event id %s does not match the event's content (its hash is %s)", e.ID, want)
	}
	if !isLowerHex(e.PubKey, 64) {
		return fmt.Errorf("nostr: verify: event pubkey %q is not 64 lowercase hex characters", clip(e.PubKey))
	}
	pkBytes, _ := hex.DecodeString(e.PubKey)
	pub, err := schnorr.ParsePubKey(pkBytes)
	if err != nil {
		return fmt.Errorf("nostr: verify: event pubkey %s is not a point on secp256k1", e.PubKey)
	}
	if !isLowerHex(e.Sig, 128) {
		return fmt.Errorf("nostr: verify: event sig %q is not 128 lowercase hex characters", clip(e.Sig))
	}
	sigBytes, _ := hex.DecodeString(e.Sig)
	sig, err := schnorr.ParseSignature(sigBytes)
	if err != nil {
		return fmt.Errorf("nostr: verify: event sig is malformed: %v", err)
	}
	id, _ := hex.DecodeString(e.ID)
	if !sig.Verify(id, pub) {
		return fmt.Errorf("nostr: verify: event sig is not a valid signature of id %s by pubkey %s", e.ID, e.PubKey)
	}
	return nil
}

// SignEvent signs the event with k: it sets PubKey, then ID, then Sig (a
// BIP-340 signature with 32 bytes of auxiliary randomness from
// crypto/rand). CreatedAt, Kind, Tags and Content are the caller's.
func SignEvent(k *SecretKey, e *Event) error {
	if e == nil {
		return errors.New("nostr: sign: no event")
	}
	var aux [32]byte
	if _, err := rand.Read(aux[:]); err != nil {
		return fmt.Errorf("nostr: sign: reading random bytes: %w", err)
	}
	return signEventAux(k, e, aux)
}

// signEventAux is SignEvent with the BIP-340 auxiliary randomness given.
func signEventAux(k *SecretKey, e *Event, aux [32]byte) error {
	pub := k.PublicKey()
	if pub == "" {
		return ErrKeyWiped
	}
	e.PubKey = pub
	e.ID = e.ComputeID()
	id, _ := hex.DecodeString(e.ID)
	sig, err := signHashAux(k, id, aux)
	if err != nil {
		return err
	}
	e.Sig = sig
	return nil
}

// SignHash returns the BIP-340 signature (128 hex characters) of a
// 32-byte hash by k, with auxiliary randomness from crypto/rand.
func SignHash(k *SecretKey, hash []byte) (string, error) {
	var aux [32]byte
	if _, err := rand.Read(aux[:]); err != nil {
		return "", fmt.Errorf("nostr: sign: reading random bytes: %w", err)
	}
	return signHashAux(k, hash, aux)
}

// signHashAux is SignHash with the auxiliary randomness given.
func signHashAux(k *SecretKey, hash []byte, aux [32]byte) (string, error) {
	if len(hash) != 32 {
		return "", fmt.Errorf("nostr: sign: a hash is 32 bytes, got %d", len(hash))
	}
	priv, err := k.privKey()
	if err != nil {
		return "", err
	}
	defer priv.Zero()
	sig, err := schnorr.Sign(priv, hash, schnorr.CustomNonce(aux))
	if err != nil {
		return "", fmt.Errorf("nostr: sign: %w", err)
	}
	return hex.EncodeToString(sig.Serialize()), nil
}

// VerifySignature checks a BIP-340 signature (128 hex characters) of a
// 32-byte hash by an x-only public key (64 hex characters).
func VerifySignature(pubHex string, hash []byte, sigHex string) error {
	if len(hash) != 32 {
		return fmt.Errorf("nostr: verify: a hash is 32 bytes, got %d", len(hash))
	}
	pub, err := parsePoint("public key", pubHex)
	if err != nil {
		return err
	}
	if len(sigHex) != 128 {
		return fmt.Errorf("nostr: verify: a signature is 128 hex characters, got %d", len(sigHex))
	}
	sigBytes, err := hex.DecodeString(sigHex)
	if err != nil {
		return errors.New("nostr: verify: signature is not hex")
	}
	sig, err := schnorr.ParseSignature(sigBytes)
	if err != nil {
		return fmt.Errorf("nostr: verify: signature is malformed: %v", err)
	}
	if !sig.Verify(hash, pub) {
		return errors.New("nostr: verify: signature is not valid for this hash and public key")
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// clip shortens a malformed field for an error message.
func clip(s string) string {
	if len(s) > 140 {
		return s[:140] + "…"
	}
	return s
}
