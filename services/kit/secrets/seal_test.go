package secrets

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	k, err := newKey(append([]byte(nil), keyBytes...))
	if err != nil {
		t.Fatal(err)
	}
	value := []byte("sk-proj-0123456789abcdef")
	sealed, err := k.Seal("agent.api_key", value)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, value) || bytes.Contains(sealed, []byte("0123456789")) {
		t.Fatalf("sealed record contains the value: %s", sealed)
	}
	got, err := k.Open("agent.api_key", sealed)
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("Open = %q, %v; want %q", got, err, value)
	}

	if _, err := k.Open("other.name", sealed); !errors.Is(err, ErrTampered) {
		t.Errorf("Open under another name: err = %v, want ErrTampered", err)
	}
	other := append([]byte(nil), keyBytes...)
	other[0] ^= 1
	k2, err := newKey(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Open("agent.api_key", sealed); !errors.Is(err, ErrWrongKey) {
		t.Errorf("Open with another key: err = %v, want ErrWrongKey", err)
	}
	var nilKey *Key
	if _, err := nilKey.Seal("agent.api_key", value); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil key Seal: err = %v, want ErrNoKey", err)
	}
	if _, err := nilKey.Open("agent.api_key", sealed); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil key Open: err = %v, want ErrNoKey", err)
	}
	if _, err := k.Seal("agent.api_key", nil); err == nil {
		t.Error("Seal of an empty value: no error")
	}
	if _, err := k.Open("agent.api_key", []byte("not json")); err == nil || bytes.Contains([]byte(err.Error()), value) {
		t.Errorf("Open of garbage: err = %v", err)
	}
}
