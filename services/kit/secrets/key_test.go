package secrets

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// keyBytes is a fixed key for tests.
var keyBytes = func() []byte {
	b := make([]byte, KeySize)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}()

func wantID(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

func TestLoadKeyForms(t *testing.T) {
	t.Parallel()
	id := wantID(keyBytes)
	for _, text := range []string{
		base64.StdEncoding.EncodeToString(keyBytes),
		base64.RawStdEncoding.EncodeToString(keyBytes),
		base64.URLEncoding.EncodeToString(keyBytes),
		base64.RawURLEncoding.EncodeToString(keyBytes),
		hex.EncodeToString(keyBytes),
		strings.ToUpper(hex.EncodeToString(keyBytes)),
		"  " + base64.StdEncoding.EncodeToString(keyBytes) + "\n",
	} {
		k, err := LoadKey(env(map[string]string{EnvKey: text}))
		if err != nil {
			t.Fatalf("LoadKey(%q): %v", text, err)
		}
		if k.ID() != id {
			t.Errorf("LoadKey(%q).ID() = %s, want %s", text, k.ID(), id)
		}
	}
}

func TestLoadKeyErrors(t *testing.T) {
	t.Parallel()
	if _, err := LoadKey(env(nil)); !errors.Is(err, ErrNoKey) {
		t.Errorf("no variables: err = %v, want ErrNoKey", err)
	}
	short := base64.StdEncoding.EncodeToString(keyBytes[:16])
	for _, tc := range []struct{ text, want string }{
		{short, "base64 of 16 bytes"},
		{"not a key at all, sorry!", "neither base64 nor 64 hex digits"},
		{strings.Repeat("zz", 32), "base64 of 48 bytes"},
		{strings.Repeat("g!", 32), "neither base64 nor 64 hex digits"},
		{"   ", "empty"},
	} {
		_, err := LoadKey(env(map[string]string{EnvKey: tc.text}))
		if err == nil {
			t.Fatalf("LoadKey(%q) accepted it", tc.text)
		}
		msg := err.Error()
		if !strings.Contains(msg, EnvKey) || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "64 hex digits") {
			t.Errorf("LoadKey(%q) error %q: want the variable, %q and the expected form", tc.text, msg, tc.want)
		}
		if strings.TrimSpace(tc.text) != "" && strings.Contains(msg, tc.text) {
			t.Errorf("error %q repeats the rejected key text", msg)
		}
	}
	_, err := LoadKey(env(map[string]string{EnvKey: hex.EncodeToString(keyBytes), EnvKeyFile: "/nonexistent"}))
	if err == nil || !strings.Contains(err.Error(), "set only one") {
		t.Errorf("both variables: err = %v, want 'set only one'", err)
	}
	_, err = LoadKey(env(map[string]string{EnvKeyFile: filepath.Join(t.TempDir(), "missing.key")}))
	if err == nil || !strings.Contains(err.Error(), EnvKeyFile) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key file: err = %v, want one naming %s", err, EnvKeyFile)
	}
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := wantID(keyBytes)
	for name, data := range map[string][]byte{
		"raw.key":    keyBytes,
		"base64.key": []byte(base64.StdEncoding.EncodeToString(keyBytes) + "\n"),
		"hex.key":    []byte(hex.EncodeToString(keyBytes) + "\r\n"),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadKey(env(map[string]string{EnvKeyFile: p}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k.ID() != id {
			t.Errorf("%s: id %s, want %s", name, k.ID(), id)
		}
	}

	// Readable by others: refused, like ssh does, with the fix.
	p := filepath.Join(dir, "open.key")
	if err := os.WriteFile(p, keyBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadKeyFile(p)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) || !strings.Contains(err.Error(), fmt.Sprintf("%04o", mode)) {
			t.Errorf("mode %04o: err = %v, want a refusal naming the mode and chmod 600", mode, err)
		}
	}

	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(bad); err == nil || !strings.Contains(err.Error(), "32 raw bytes") || strings.Contains(err.Error(), "hello") {
		t.Errorf("bad key file: err = %v", err)
	}
}

func TestGenerateKeyFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "data", "secret.key")
	k, created, err := LoadOrCreateKeyFile(p)
	if err != nil || !created {
		t.Fatalf("LoadOrCreateKeyFile = %v, %v; want a new key", created, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(p)); dst.Mode().Perm() != 0o700 {
		t.Errorf("key dir mode %04o, want 0700", dst.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKeyFile(p)
	if err != nil || created || k2.ID() != k.ID() {
		t.Fatalf("second LoadOrCreateKeyFile = %v, %v, %v; want the same key %s", k2, created, err, k)
	}
	if _, err := GenerateKeyFile(p); !errors.Is(err, os.ErrExist) {
		t.Errorf("GenerateKeyFile over an existing file: err = %v, want ErrExist", err)
	}
	text, err := GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := base64.StdEncoding.DecodeString(text); err != nil || len(b) != KeySize {
		t.Errorf("GenerateKeyText = %d characters: not base64 of 32 bytes (%v)", len(text), err)
	}
}

// TestKeyPrintsNoMaterial checks every way a key could be printed.
func TestKeyPrintsNoMaterial(t *testing.T) {
	t.Parallel()
	k, err := ParseKey(hex.EncodeToString(keyBytes))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("loaded", "key", k)
	js, _ := json.Marshal(map[string]any{"key": k})
	out := fmt.Sprintf("%v|%+v|%#v|%s|%x|%X|%d|%q|%v", k, k, k, k, k, k, k, k, *k) + logs.String() + string(js)
	if !strings.Contains(out, k.ID()) {
		t.Errorf("printed key %q does not show its id", out)
	}
	// The expanded AES key schedule starts with the key itself.
	for _, leak := range []string{
		hex.EncodeToString(keyBytes[:8]), strings.ToUpper(hex.EncodeToString(keyBytes[:8])),
		base64.StdEncoding.EncodeToString(keyBytes)[:12], fmt.Sprint(keyBytes[:4])[1:9],
	} {
		if strings.Contains(out, leak) {
			t.Errorf("printed key contains key material %q: %s", leak, out)
		}
	}
}
