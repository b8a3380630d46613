// Package secrets keeps operator secrets (passwords, API keys) that AI
// agents use without ever seeing them. An agent writes a placeholder,
// {{secrets.NAME}}, in a tool's arguments; the browser worker substitutes
// the value just before it acts ([Cache.Substitute]) and scrubs the value
// from everything it returns ([Cache.Scrub]), so only the placeholder
// travels through the gateway, the audit trail and the model.
//
// # Storage
//
// Values are encrypted with AES-256-GCM under a 32-byte [Key] that the
// operator configures ([EnvKey] or [EnvKeyFile]; `sovereign up` keeps one
// under its data dir). Each value gets a random 96-bit nonce and the
// secret's name as additional data, so a record copied under another name
// fails to decrypt. Before encryption a value is padded to a multiple of
// 64 bytes, so the record does not tell its length either (beyond that).
// Records are JSON in the JetStream KV bucket [Bucket] (file storage, one
// revision kept): {"v", "name", "key_id", "nonce", "ciphertext",
// "updated"}. key_id names the key (see [Key.ID]), so a process with
// another key says which key a value needs instead of failing vaguely.
//
// Listing names ([Store.Names]) and deleting need no key, so a gateway or
// a console can show which secrets exist.
//
// # Names and values
//
// A name is a letter or _, then up to 63 letters, digits or _ (case
// matters). A value is 1 byte to 64 KiB of UTF-8 text without NUL.
//
// # Scrubbing
//
// [Cache.Scrub] replaces every value of at least [MinScrubLen] bytes, and
// the forms a page or a URL shows it in (percent-encoded, HTML-escaped,
// JSON-escaped, base64, also inside a longer base64 blob), with its
// placeholder; text with escapes (Markdown's \_, HTML's &#97;, JSON's and
// JavaScript's \u0061 and \x61, URLs' %61) is also read decoded
// (decode.go). [Cut] is the one way to shorten text: it scrubs first
// (cut.go). [Cache.ScrubFile] scrubs or refuses a file (files.go). Shorter values are still
// substituted but never scrubbed: a 2-character secret would otherwise
// cut every word that contains it. `sovereign secret set` warns about them.
//
// No value is ever part of an error, a log line or the printed form of a
// type of this package. Values live in memory as byte slices that are
// zeroed when a secret is replaced or deleted and when a [Cache] closes;
// copies handed out (the result of Substitute, strings given to a
// [redact.Set]) are the caller's.
package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits of names and values.
const (
	MaxNameLen  = 64
	MaxValueLen = 64 << 10
	// MinScrubLen is the shortest value that Scrub replaces in text.
	MinScrubLen = 4
)

// padBlock is the multiple that plaintexts are padded to.
const padBlock = 64

// Errors of the package.
var (
	// ErrNotFound means that no secret has the name.
	ErrNotFound = errors.New("no such secret")
	// ErrUnknownSecret is wrapped by Substitute for a placeholder whose
	// secret does not exist.
	ErrUnknownSecret = errors.New("unknown secret")
	// ErrWrongKey is wrapped when a value was encrypted with another key.
	ErrWrongKey = errors.New("encrypted with another key")
	// ErrTampered is wrapped when a value fails its integrity check.
	ErrTampered = errors.New("failed its integrity check")
)

// ValidName reports whether name is a valid secret name, and if not, why.
func ValidName(name string) error {
	if name == "" {
		return errors.New("a secret name is empty: use letters, digits and _, starting with a letter or _ (API_TOKEN)")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("secret name %.20q… is %d characters: at most %d", name, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("secret name %q: only letters, digits and _ may be used, and it may not start with a digit (API_TOKEN, github_pat)", name)
		}
	}
	return nil
}

// ValidValue reports whether v is a valid secret value, and if not, why.
// The error never contains the value.
func ValidValue(v []byte) error {
	switch {
	case len(v) == 0:
		return errors.New("the secret value is empty")
	case len(v) > MaxValueLen:
		return fmt.Errorf("the secret value is %d bytes: at most %d (64 KiB)", len(v), MaxValueLen)
	case bytes.IndexByte(v, 0) >= 0:
		return errors.New("the secret value contains a NUL byte: values are text")
	case !utf8.Valid(v):
		return errors.New("the secret value is not valid UTF-8 text: encode binary values (base64) first")
	}
	return nil
}

// record is a stored secret.
type record struct {
	V          int       `json:"v"`
	Name       string    `json:"name"`
	KeyID      string    `json:"key_id"`
	Nonce      []byte    `json:"nonce"`
	Ciphertext []byte    `json:"ciphertext"`
	Updated    time.Time `json:"updated"`
}

// seal encrypts value under name.
func (k *Key) seal(name string, value []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("random nonce: %w", err)
	}
	// Padding: value, 0x80, zeros up to a multiple of padBlock.
	padded := make([]byte, (len(value)/padBlock+1)*padBlock)
	copy(padded, value)
	padded[len(value)] = 0x80
	defer clear(padded)
	r := record{
		V: 1, Name: name, KeyID: k.id, Nonce: nonce,
		Ciphertext: k.aead.Seal(nil, nonce, padded, []byte(name)),
		Updated:    time.Now().UTC(),
	}
	return json.Marshal(r)
}

// decode parses a stored record of the secret name (the KV key).
func decode(name string, data []byte) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("secret %q: its record is not valid (%v): set it again with sovereign secret set %s", name, err, name)
	}
	if r.V != 1 {
		return r, fmt.Errorf("secret %q: record version %d is not known to this build", name, r.V)
	}
	return r, nil
}

// open decrypts the record r of the secret name.
func (k *Key) open(name string, r record) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKey
	}
	if r.KeyID != k.id {
		return nil, fmt.Errorf("secret %q was %w %s, this process has key %s: give it the key the secret was set with, or set the secret again (sovereign secret set %s)",
			name, ErrWrongKey, r.KeyID, k.id, name)
	}
	if len(r.Nonce) != k.aead.NonceSize() || r.Name != name {
		return nil, tampered(name, k)
	}
	padded, err := k.aead.Open(nil, r.Nonce, r.Ciphertext, []byte(name))
	if err != nil {
		return nil, tampered(name, k)
	}
	end := len(padded) - 1
	for end >= 0 && padded[end] == 0 {
		end--
	}
	if end < 1 || padded[end] != 0x80 {
		clear(padded)
		return nil, tampered(name, k)
	}
	return padded[:end:end], nil
}

func tampered(name string, k *Key) error {
	return fmt.Errorf("secret %q %w with key %s: its record was altered or copied from another name; set it again (sovereign secret set %s)",
		name, ErrTampered, k.id, name)
}
