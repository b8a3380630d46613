package sovereign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// secretRun runs `sovereign secret args...` with stdin (a pipe) and the
// environment env, and returns what it printed.
func secretRun(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	r, w, perr := os.Pipe()
	if perr != nil {
		t.Fatal(perr)
	}
	defer r.Close()
	go func() {
		_, _ = w.WriteString(stdin)
		_ = w.Close()
	}()
	var out, errOut bytes.Buffer
	err = secretCmd(context.Background(), args, stdio{in: r, out: &out, err: &errOut}, func(k string) string { return env[k] })
	return out.String(), errOut.String(), err
}

// natsForCLI starts a NATS server that the CLI reaches by URL.
func natsForCLI(t *testing.T) string {
	t.Helper()
	srv, err := natsrv.Start(natsrv.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.ClientURL()
}

// readBack decrypts a stored secret with key text.
func readBack(t *testing.T, url, keyText, name string) ([]byte, error) {
	t.Helper()
	k, err := secrets.ParseKey(keyText)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	st, err := secrets.Open(context.Background(), nc, "", k)
	if err != nil {
		t.Fatal(err)
	}
	return st.Get(context.Background(), name)
}

func TestSecretCLI(t *testing.T) {
	t.Parallel()
	url := natsForCLI(t)
	keyText, hint, err := secretRun(t, nil, "", "keygen")
	if err != nil {
		t.Fatal(err)
	}
	keyText = strings.TrimSpace(keyText)
	if _, err := secrets.ParseKey(keyText); err != nil || !strings.Contains(hint, secrets.EnvKey) {
		t.Fatalf("keygen printed %q (%v), hint %q", keyText, err, hint)
	}
	env := map[string]string{"NATS_URL": url, secrets.EnvKey: keyText, "SOVEREIGN_DATA_DIR": t.TempDir()}
	const value = "correct horse battery staple"

	// A pipe: everything, less one trailing newline.
	out, errOut, err := secretRun(t, env, value+"\n", "set", "SHOP_PASSWORD")
	if err != nil {
		t.Fatalf("set: %v (%s)", err, errOut)
	}
	if !strings.Contains(out, "secret SHOP_PASSWORD set") || !strings.Contains(out, "{{secrets.SHOP_PASSWORD}}") {
		t.Errorf("set printed %q", out)
	}
	if got, err := readBack(t, url, keyText, "SHOP_PASSWORD"); err != nil || string(got) != value {
		t.Errorf("stored value = %q, %v; want %q", got, err, value)
	}
	// Multi-line values keep their inner newlines.
	if _, _, err := secretRun(t, env, "line1\nline2\n\n", "set", "MULTI"); err != nil {
		t.Fatal(err)
	}
	if got, _ := readBack(t, url, keyText, "MULTI"); string(got) != "line1\nline2\n" {
		t.Errorf("multi-line value = %q", got)
	}

	// --from-file, with the flag after the name.
	f := filepath.Join(t.TempDir(), "token.txt")
	if err := os.WriteFile(f, []byte("ghp_fromfile123\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := secretRun(t, env, "ignored", "set", "GH_TOKEN", "--from-file", f); err != nil {
		t.Fatal(err)
	}
	if got, _ := readBack(t, url, keyText, "GH_TOKEN"); string(got) != "ghp_fromfile123" {
		t.Errorf("--from-file value = %q", got)
	}

	// list: names, never values.
	out, _, err = secretRun(t, env, "", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"NAME", "GH_TOKEN", "MULTI", "SHOP_PASSWORD"} {
		if !strings.Contains(out, n) {
			t.Errorf("list lacks %s:\n%s", n, out)
		}
	}
	for _, v := range []string{"horse", "ghp_", "line1"} {
		if strings.Contains(out, v) {
			t.Errorf("list shows a value (%q):\n%s", v, out)
		}
	}
	out, _, err = secretRun(t, env, "", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var infos []secrets.Info
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 3 || infos[0].Name != "GH_TOKEN" || infos[0].Updated.IsZero() {
		t.Errorf("list --json = %s (%v)", out, err)
	}
	if strings.Contains(out, "horse") || strings.Contains(out, "ghp_") {
		t.Errorf("list --json shows a value:\n%s", out)
	}
	// list needs no key.
	noKey := map[string]string{"NATS_URL": url, "SOVEREIGN_DATA_DIR": t.TempDir()}
	if out, _, err := secretRun(t, noKey, "", "list"); err != nil || !strings.Contains(out, "GH_TOKEN") {
		t.Errorf("list without a key = %q, %v", out, err)
	}

	// delete.
	if out, _, err := secretRun(t, noKey, "", "delete", "MULTI"); err != nil || !strings.Contains(out, "MULTI deleted") {
		t.Errorf("delete = %q, %v", out, err)
	}
	if _, _, err := secretRun(t, env, "", "delete", "MULTI"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("delete twice: err = %v, want not found", err)
	}
	if _, err := readBack(t, url, keyText, "MULTI"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("deleted secret still readable: %v", err)
	}
}

func TestSecretCLIErrors(t *testing.T) {
	t.Parallel()
	url := natsForCLI(t)
	keyText, err := secrets.GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_URL": url, secrets.EnvKey: keyText, "SOVEREIGN_DATA_DIR": t.TempDir()}
	var usage app.UsageError
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "NAME", "the-value"}, "never from the command line"},
		{[]string{"set"}, "usage: sovereign secret set NAME"},
		{[]string{"set", "bad-name"}, "only letters, digits and _"},
		{[]string{"delete"}, "usage: sovereign secret delete NAME"},
		{[]string{"list", "extra"}, "takes no arguments"},
		{[]string{"frobnicate"}, `unknown command "secret frobnicate"`},
		{nil, "sovereign secret set NAME"},
	} {
		_, _, err := secretRun(t, env, "x", tc.args...)
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("secret %q: err = %v, want a usage error with %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "the-value") {
			t.Errorf("secret %q: error repeats the value: %v", tc.args, err)
		}
	}

	if _, _, err := secretRun(t, env, "\n", "set", "EMPTY"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty value: err = %v", err)
	}
	_, errOut, err := secretRun(t, env, "abc", "set", "PIN3")
	if err != nil || !strings.Contains(errOut, "shorter than 4 bytes") {
		t.Errorf("short value: err %v, stderr %q: want a warning", err, errOut)
	}

	// No key anywhere: set says where to get one; list still works.
	noKey := map[string]string{"NATS_URL": url, "SOVEREIGN_DATA_DIR": t.TempDir()}
	if _, _, err := secretRun(t, noKey, "value", "set", "X"); err == nil || !strings.Contains(err.Error(), "sovereign up") || !strings.Contains(err.Error(), secrets.EnvKey) {
		t.Errorf("set without a key: err = %v", err)
	}
	// A key file others can read is refused.
	kf := filepath.Join(t.TempDir(), "open.key")
	if err := os.WriteFile(kf, []byte(keyText+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	openKey := map[string]string{"NATS_URL": url, secrets.EnvKeyFile: kf}
	if _, _, err := secretRun(t, openKey, "value", "set", "X"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("open key file: err = %v, want the chmod advice", err)
	}
	// Another key than the stored secrets': a warning naming both.
	other, _ := secrets.GenerateKeyText()
	otherEnv := map[string]string{"NATS_URL": url, secrets.EnvKey: other}
	otherKey, _ := secrets.ParseKey(other)
	firstKey, _ := secrets.ParseKey(keyText)
	_, errOut, err = secretRun(t, otherEnv, "some-value", "set", "OTHER")
	if err != nil || !strings.Contains(errOut, firstKey.ID()) || !strings.Contains(errOut, otherKey.ID()) {
		t.Errorf("set with another key: err %v, stderr %q: want a warning naming both keys", err, errOut)
	}
	out, _, _ := secretRun(t, env, "", "list")
	if !strings.Contains(out, "not this machine's key") {
		t.Errorf("list does not mark the secret set with another key:\n%s", out)
	}
	// NATS down: a clear error.
	down := map[string]string{"NATS_URL": "nats://127.0.0.1:1", secrets.EnvKey: keyText}
	if _, _, err := secretRun(t, down, "", "list", "--timeout", "1s"); err == nil || !strings.Contains(err.Error(), "--nats-url") {
		t.Errorf("no NATS: err = %v", err)
	}
}

// TestSecretWithUp runs `sovereign up` and sets a secret with no key
// configured anywhere: both use <data dir>/secret.key.
func TestSecretWithUp(t *testing.T) {
	t.Setenv(secrets.EnvKey, "")
	t.Setenv(secrets.EnvKeyFile, "")
	_, natsListen, dir := startUp(t, "--workers", "0", "--history=false")
	st, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatalf("sovereign up made no key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	env := map[string]string{"NATS_URL": "nats://" + natsListen}
	out, errOut, err := secretRun(t, env, "up-secret-value", "set", "UP_SECRET", "--data-dir", dir)
	if err != nil {
		t.Fatalf("set with the data dir's key: %v (%s)", err, errOut)
	}
	k, err := secrets.LoadKeyFile(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "key "+k.ID()) {
		t.Errorf("set used another key than up's %s: %q", k.ID(), out)
	}
	// The key up resolves again is the same one.
	k2, err := secretKeyForUp(dir)
	if err != nil || k2.ID() != k.ID() {
		t.Errorf("secretKeyForUp = %v, %v; want key %s", k2, err, k.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect("nats://" + natsListen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	store, err := secrets.Open(ctx, nc, "", k2)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := store.Get(ctx, "UP_SECRET"); err != nil || string(v) != "up-secret-value" {
		t.Errorf("Get = %q, %v", v, err)
	}
}
