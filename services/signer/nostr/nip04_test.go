package nostr

import (
	"strings"
	"testing"
)

// NIP-04 has no published vectors. This one was computed independently
// of this package: the ECDH x coordinate with a pure-Python secp256k1
// (f40bb548…d84d), then `openssl enc -aes-256-cbc -K <x> -iv 000102…0f`.
const (
	nip04SecA    = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
	nip04SecB    = "2122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f40"
	nip04PubA    = "84bf7562262bbd6940085748f3be6afa52ae317155181ece31b66351ccffa4b0"
	nip04PubB    = "207bba70bc66309baa582a6ac120fd52d68026c51f6326f8ccedcbd2c1b7eb82"
	nip04Plain   = "Hello, NIP-04! ünïcödé 🔐"
	nip04Payload = "F8WelhJVTU4XKX3VI2Zz9UX3a4bnZXVCQT77q5RXhjA=?iv=AAECAwQFBgcICQoLDA0ODw=="
)

func TestNip04Vector(t *testing.T) {
	a, b := mustKey(t, nip04SecA), mustKey(t, nip04SecB)
	if a.PublicKey() != nip04PubA || b.PublicKey() != nip04PubB {
		t.Fatalf("public keys %s %s", a.PublicKey(), b.PublicKey())
	}
	iv := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	got, err := nip04EncryptIV(a, nip04PubB, nip04Plain, iv)
	if err != nil || got != nip04Payload {
		t.Errorf("encrypt = %s, %v; want %s", got, err, nip04Payload)
	}
	// Either side decrypts.
	for _, c := range []struct {
		k    *SecretKey
		peer string
	}{{b, nip04PubA}, {a, nip04PubB}} {
		plain, err := Nip04Decrypt(c.k, c.peer, nip04Payload)
		if err != nil || plain != nip04Plain {
			t.Errorf("decrypt = %q, %v", plain, err)
		}
	}
}

func TestNip04RoundTrip(t *testing.T) {
	a, b := mustKey(t, nip04SecA), mustKey(t, nip04SecB)
	for _, plain := range []string{"", "x", strings.Repeat("16 bytes exactly", 4), "🦄 " + strings.Repeat("long ", 500)} {
		p1, err := Nip04Encrypt(a, nip04PubB, plain)
		if err != nil {
			t.Fatal(err)
		}
		p2, _ := Nip04Encrypt(a, nip04PubB, plain)
		if p1 == p2 {
			t.Error("two encryptions are equal: IV not random")
		}
		if got, err := Nip04Decrypt(b, nip04PubA, p1); err != nil || got != plain {
			t.Errorf("round trip of %d bytes: %q, %v", len(plain), got, err)
		}
	}
}

func TestNip04Errors(t *testing.T) {
	a, b := mustKey(t, nip04SecA), mustKey(t, nip04SecB)
	other := mustKey(t, "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a")
	ct, iv, _ := strings.Cut(nip04Payload, "?iv=")
	tests := []struct {
		name, payload, errPart string
		k                      *SecretKey
	}{
		{"no iv", ct, "?iv=", b},
		{"bad base64", "!!" + nip04Payload, "base64", b},
		{"short iv", ct + "?iv=AAEC", "iv is 3 bytes", b},
		{"ciphertext not whole blocks", "AAAA?iv=" + iv, "multiple of 16", b},
		{"wrong key", nip04Payload, "", other}, // bad padding or not UTF-8, or (1/256) garbage
	}
	for _, tt := range tests {
		got, err := Nip04Decrypt(tt.k, nip04PubA, tt.payload)
		if err == nil {
			if tt.name == "wrong key" && got != nip04Plain {
				continue // garbage that happens to unpad; never the plaintext
			}
			t.Errorf("%s: decrypt succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
	}
	if _, err := Nip04Encrypt(a, "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34", "x"); err == nil || !strings.Contains(err.Error(), "not a point") {
		t.Errorf("peer off the curve: %v", err)
	}
}
