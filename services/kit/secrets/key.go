package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Environment variables that configure the key.
const (
	// EnvKey holds the key itself: 32 bytes as base64 (standard or URL
	// alphabet, padded or not) or as 64 hex digits.
	EnvKey = "SOVEREIGN_SECRET_KEY"
	// EnvKeyFile names a file that holds the key in the same encodings, or
	// as 32 raw bytes. The file must not be readable by group or others.
	EnvKeyFile = "SOVEREIGN_SECRET_KEY_FILE"
)

// KeySize is the size of a key in bytes (AES-256).
const KeySize = 32

// ErrNoKey means that neither [EnvKey] nor [EnvKeyFile] is set.
var ErrNoKey = errors.New("no secret key configured: set " + EnvKey + " or " + EnvKeyFile +
	" (make one with `sovereign secret keygen`)")

// keyForm describes the accepted encodings in errors.
const keyForm = "32 bytes as base64 (44 characters, as `sovereign secret keygen` prints) or as 64 hex digits"

// A Key encrypts and decrypts secret values (AES-256-GCM). It keeps only
// the expanded cipher, not the key bytes, and prints as its id alone (in
// fmt, slog and JSON), so it cannot leak through a log line. Its methods
// are safe for concurrent use.
type Key struct {
	id   string
	aead cipher.AEAD
}

// newKey builds a Key from 32 bytes and zeroes b.
func newKey(b []byte) (*Key, error) {
	defer clear(b)
	if len(b) != KeySize {
		return nil, fmt.Errorf("a secret key is %d bytes, not %d", KeySize, len(b))
	}
	block, err := aes.NewCipher(b)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &Key{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// ID is the key's id: the first 8 hex digits of the SHA-256 of the key.
// It is stored with every value, so that a process with another key can
// say which key a value needs. It tells nothing about the key itself.
func (k *Key) ID() string {
	if k == nil {
		return ""
	}
	return k.id
}

// String returns "secret key <id>".
func (k *Key) String() string {
	if k == nil {
		return "no secret key"
	}
	return "secret key " + k.id
}

// GoString is String: %#v shows no key material either.
func (k *Key) GoString() string { return k.String() }

// Format prints String for every verb, so that no fmt verb (%x, %d, %+v)
// walks the key's fields, whether the key is printed by pointer or by
// value.
func (k Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// LogValue is the key's id for slog.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON encodes the key as {"id": "<id>"}.
func (k Key) MarshalJSON() ([]byte, error) {
	return []byte(`{"id":"` + k.ID() + `"}`), nil
}

// ParseKey reads a key written as base64 (standard or URL alphabet,
// padded or not) or as 64 hex digits; surrounding white space is ignored.
// Its errors never contain the text.
func ParseKey(text string) (*Key, error) {
	b, err := decodeKey([]byte(text))
	if err != nil {
		return nil, err
	}
	return newKey(b)
}

// decodeKey decodes a written key to 32 bytes.
func decodeKey(text []byte) ([]byte, error) {
	t := strings.TrimSpace(string(text))
	if t == "" {
		return nil, fmt.Errorf("it is empty; want %s", keyForm)
	}
	if len(t) == 2*KeySize {
		if b, err := hex.DecodeString(t); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(t); err == nil {
			if len(b) == KeySize {
				return b, nil
			}
			clear(b)
			return nil, fmt.Errorf("it is base64 of %d bytes; want %s", len(b), keyForm)
		}
	}
	return nil, fmt.Errorf("it is %d characters that are neither base64 nor 64 hex digits; want %s", len(t), keyForm)
}

// LoadKey reads the key from the environment (env is os.Getenv, or a
// stand-in in tests): [EnvKey], else the file [EnvKeyFile] names. It
// returns [ErrNoKey] when neither is set, so that a caller can fall back
// to a key file of its own.
func LoadKey(env func(string) string) (*Key, error) {
	text, file := env(EnvKey), env(EnvKeyFile)
	switch {
	case text != "" && file != "":
		return nil, fmt.Errorf("both %s and %s are set: set only one", EnvKey, EnvKeyFile)
	case text != "":
		b, err := decodeKey([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return newKey(b)
	case file != "":
		k, err := LoadKeyFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyFile, err)
		}
		return k, nil
	}
	return nil, ErrNoKey
}

// LoadKeyFile reads a key file: 32 raw bytes, or the key as base64 or 64
// hex digits (a trailing newline is fine). Like ssh with a private key, it
// refuses a file that group or others may read or write.
func LoadKeyFile(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("secret key file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("secret key file %s is accessible by group or others (mode %04o): "+
			"a key others can read is no secret; run: chmod 600 %s", path, perm, path)
	}
	if st.Size() > 4096 {
		return nil, fmt.Errorf("secret key file %s is %d bytes: want %s, or %d raw bytes", path, st.Size(), keyForm, KeySize)
	}
	buf := make([]byte, 4097)
	defer clear(buf)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("secret key file %s: %w", path, err)
	}
	data := buf[:n]
	if len(data) == KeySize {
		// 32 raw bytes: no text form of a 32-byte key is 32 characters.
		return newKey(append([]byte(nil), data...))
	}
	b, err := decodeKey(data)
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %w, or %d raw bytes", path, err, KeySize)
	}
	return newKey(b)
}

// GenerateKeyText returns a new random key as base64, the form to put in
// [EnvKey] or a key file.
func GenerateKeyText() (string, error) {
	b := make([]byte, KeySize)
	defer clear(b)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// GenerateKeyFile writes a new random key (base64 and a newline) to a new
// file at path, readable by its owner only (0600), and returns it. It
// fails when the file exists.
func GenerateKeyFile(path string) (*Key, error) {
	text, err := GenerateKeyText()
	if err != nil {
		return nil, err
	}
	k, err := ParseKey(text)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	_, werr := f.WriteString(text + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("secret key file %s: %w", path, werr)
	}
	return k, nil
}

// LoadOrCreateKeyFile reads the key file at path, or creates it with a new
// key (see [GenerateKeyFile]) when it does not exist; created says which.
// The directory is created (0700) when missing.
func LoadOrCreateKeyFile(path string) (k *Key, created bool, err error) {
	k, err = LoadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("secret key file: %w", err)
	}
	k, err = GenerateKeyFile(path)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first.
		k, err = LoadKeyFile(path)
		return k, false, err
	}
	return k, err == nil, err
}
