package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func testKey(t testing.TB) *Key {
	t.Helper()
	text, err := GenerateKeyText()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openStore(t testing.TB, nc *nats.Conn, key *Key) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, nc, "", key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawKV opens the bucket directly, as an attacker with NATS access would.
func rawKV(t *testing.T, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "sov_secrets")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestBucketName(t *testing.T) {
	t.Parallel()
	for prefix, want := range map[string]string{"": "sov_secrets", "sov": "sov_secrets", "test.a": "test_a_secrets", "x-y": "x-y_secrets"} {
		if got := Bucket(prefix); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", prefix, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	s := openStore(t, nc, testKey(t))
	ctx := context.Background()
	value := []byte("correct horse battery staple ✓")
	if err := s.Set(ctx, "GITHUB_PAT", value); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "GITHUB_PAT")
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("Get = %q, %v; want %q", got, err, value)
	}
	if _, err := s.Get(ctx, "github_pat"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "sovereign secret set github_pat") {
		t.Errorf("names are case-sensitive: Get(github_pat) err = %v, want ErrNotFound", err)
	}

	// What the bucket holds: the documented fields, no value, no length.
	kv := rawKV(t, nc)
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 1 || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Storage != jetstream.FileStorage {
		t.Errorf("bucket: history %d, storage %v; want 1 and file", st.History(), st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Storage)
	}
	e, err := kv.Get(ctx, "GITHUB_PAT")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(e.Value(), []byte("horse")) {
		t.Fatalf("stored record holds the value: %s", e.Value())
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Value(), &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"v", "name", "key_id", "nonce", "ciphertext", "updated"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("record lacks %q: %s", f, e.Value())
		}
		delete(fields, f)
	}
	if len(fields) != 0 {
		t.Errorf("record has more fields than documented: %v", fields)
	}
	var r record
	_ = json.Unmarshal(e.Value(), &r)
	if r.KeyID != s.Key().ID() || len(r.Nonce) != 12 || (len(r.Ciphertext)-16)%padBlock != 0 {
		t.Errorf("record: key %s nonce %d bytes ciphertext %d bytes; want key %s, 12, padded to %d plus the tag",
			r.KeyID, len(r.Nonce), len(r.Ciphertext), s.Key().ID(), padBlock)
	}

	// Padding hides the length: a 1-byte and a 40-byte value look alike.
	_ = s.Set(ctx, "A", []byte("x"))
	_ = s.Set(ctx, "B", bytes.Repeat([]byte("y"), 40))
	ea, _ := kv.Get(ctx, "A")
	eb, _ := kv.Get(ctx, "B")
	var ra, rb record
	_ = json.Unmarshal(ea.Value(), &ra)
	_ = json.Unmarshal(eb.Value(), &rb)
	if len(ra.Ciphertext) != len(rb.Ciphertext) {
		t.Errorf("ciphertexts of 1 and 40 bytes differ in length: %d, %d", len(ra.Ciphertext), len(rb.Ciphertext))
	}
	// Every length survives the padding, including a full block and a
	// value that ends in 0x80 ("À" is C3 80) like the padding's marker.
	for _, n := range []int{2, 63, 64, 65, 127, 128, MaxValueLen} {
		v := append(bytes.Repeat([]byte("a"), n-2), "À"...)
		if err := s.Set(ctx, "LEN", v); err != nil {
			t.Fatalf("Set %d bytes: %v", n, err)
		}
		got, err := s.Get(ctx, "LEN")
		if err != nil || !bytes.Equal(got, v) {
			t.Errorf("round trip of %d bytes: got %d bytes, %v", n, len(got), err)
		}
	}
}

func TestWrongKey(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	a, b := testKey(t), testKey(t)
	sa, sb := openStore(t, nc, a), openStore(t, nc, b)
	ctx := context.Background()
	if err := sa.Set(ctx, "TOKEN", []byte("s3cr3t-value")); err != nil {
		t.Fatal(err)
	}
	_, err := sb.Get(ctx, "TOKEN")
	if !errors.Is(err, ErrWrongKey) {
		t.Fatalf("Get with another key: err = %v, want ErrWrongKey", err)
	}
	msg := err.Error()
	want := `secret "TOKEN" was encrypted with another key ` + a.ID() + `, this process has key ` + b.ID()
	if !strings.Contains(msg, want) || strings.Contains(msg, "s3cr3t") {
		t.Errorf("error %q: want it to contain %q and no value", msg, want)
	}
}

func TestTampered(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	s := openStore(t, nc, testKey(t))
	ctx := context.Background()
	kv := rawKV(t, nc)
	if err := s.Set(ctx, "ALPHA", []byte("alpha-value")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "BETA", []byte("beta-value")); err != nil {
		t.Fatal(err)
	}
	e, _ := kv.Get(ctx, "ALPHA")
	var r record
	_ = json.Unmarshal(e.Value(), &r)

	// A flipped ciphertext bit.
	bad := r
	bad.Ciphertext = bytes.Clone(r.Ciphertext)
	bad.Ciphertext[3] ^= 1
	data, _ := json.Marshal(bad)
	if _, err := kv.Put(ctx, "ALPHA", data); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ALPHA"); !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "ALPHA") {
		t.Errorf("tampered ciphertext: err = %v, want ErrTampered naming ALPHA", err)
	}

	// ALPHA's record under BETA, with or without its name changed: the
	// name is authenticated.
	for _, name := range []string{"ALPHA", "BETA"} {
		moved := r
		moved.Name = name
		data, _ := json.Marshal(moved)
		if _, err := kv.Put(ctx, "BETA", data); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, "BETA"); !errors.Is(err, ErrTampered) {
			t.Errorf("ALPHA's record (name %s) under BETA: Get = %q, %v; want ErrTampered", name, v, err)
		}
	}

	if _, err := kv.Put(ctx, "BETA", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "BETA"); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Errorf("garbage record: err = %v", err)
	}
}

func TestBadNamesAndValues(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	s := openStore(t, nc, testKey(t))
	ctx := context.Background()
	for _, name := range []string{"", "1ABC", "A-B", "a.b", "a b", "ünï", strings.Repeat("A", 65), "a*", ">"} {
		err := s.Set(ctx, name, []byte("value"))
		if err == nil || !strings.Contains(err.Error(), "secret name") {
			t.Errorf("Set(%q) err = %v, want a name error", name, err)
		}
	}
	for _, name := range []string{"A", "_", "_x9", "API_TOKEN", strings.Repeat("a", 64)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v", name, err)
		}
	}
	for _, tc := range []struct {
		v    []byte
		want string
	}{
		{nil, "empty"},
		{[]byte{}, "empty"},
		{bytes.Repeat([]byte("a"), MaxValueLen+1), "at most 65536"},
		{[]byte("pass\x00word"), "NUL"},
		{[]byte("pass\xffword"), "UTF-8"},
	} {
		err := s.Set(ctx, "OK", tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pass") {
			t.Errorf("Set(%d bytes) err = %v, want %q and no value", len(tc.v), err, tc.want)
		}
	}
}

func TestWithoutKey(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	s := openStore(t, nc, testKey(t))
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	for _, n := range []string{"ZED", "ALPHA", "MID"} {
		if err := s.Set(ctx, n, []byte("value-of-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "MID"); err != nil {
		t.Fatal(err)
	}

	ro := openStore(t, nc, nil)
	infos, err := ro.Names(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name != "ALPHA" || infos[1].Name != "ZED" {
		t.Fatalf("Names = %v, want ALPHA and ZED", infos)
	}
	for _, i := range infos {
		if i.Updated.Before(before) || i.KeyID != s.Key().ID() || !strings.Contains(i.String(), i.Name) {
			t.Errorf("info %v: want a recent time and key %s", i, s.Key().ID())
		}
	}
	if err := ro.Set(ctx, "X", []byte("value")); !errors.Is(err, ErrNoKey) {
		t.Errorf("Set without a key: err = %v, want ErrNoKey", err)
	}
	if _, err := ro.Get(ctx, "ZED"); !errors.Is(err, ErrNoKey) {
		t.Errorf("Get without a key: err = %v, want ErrNoKey", err)
	}
	if _, err := ro.Watch(ctx); !errors.Is(err, ErrNoKey) {
		t.Errorf("Watch without a key: err = %v, want ErrNoKey", err)
	}
	if err := ro.Delete(ctx, "ZED"); err != nil {
		t.Errorf("Delete without a key: %v", err)
	}
	if err := ro.Delete(ctx, "ZED"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete twice: err = %v, want ErrNotFound", err)
	}
	if infos, _ := ro.Names(ctx); len(infos) != 1 {
		t.Errorf("after delete: Names = %v", infos)
	}
	empty := openStore(t, natstest.Conn(t, natstest.Server(t)), nil)
	if infos, err := empty.Names(ctx); err != nil || len(infos) != 0 {
		t.Errorf("empty bucket: Names = %v, %v", infos, err)
	}
}
