package nostr

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// NIP-49's decryption vector (log_n 16: about 0.1-0.3 s of scrypt).
func TestNcryptsecVector(t *testing.T) {
	const enc = "ncryptsec1qgg9947rlpvqu76pj5ecreduf9jxhselq2nae2kghhvd5g7dgjtcxfqtd67p9m0w57lspw8gsq6yphnm8623nsl8xn9j4jdzz84zm3frztj3z7s35vpzmqf6ksu8r89qk5z2zxfmu5gv8th8wclt0h4p"
	logN, sec, err := NcryptsecInfo(enc)
	if err != nil || logN != 16 {
		t.Fatalf("NcryptsecInfo = %d, %d, %v; want log_n 16", logN, sec, err)
	}
	k, err := DecryptNcryptsec(enc, "nostr")
	if err != nil {
		t.Fatal(err)
	}
	if !k.Equal(mustKey(t, "3501454135014541350145413501453fefb02227e449e57cf4d3a3ce05378683")) {
		t.Error("decrypted the wrong key")
	}
	if _, err := DecryptNcryptsec(enc, "nostR"); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("wrong password: %v", err)
	}
}

// NIP-49's normalisation example.
func TestNcryptsecNFKC(t *testing.T) {
	in := "\u212B\u2126\u1E9B\u0323"
	want := []byte{0xC3, 0x85, 0xCE, 0xA9, 0xE1, 0xB9, 0xA9}
	if got := []byte(norm.NFKC.String(in)); string(got) != string(want) {
		t.Errorf("NFKC(%q) = % x, want % x", in, got, want)
	}
	// Encrypting with one form decrypts with the other.
	k := mustKey(t, nip04SecA)
	enc, err := EncryptNcryptsec(k, in, 4, KeySecurityUnknown)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecryptNcryptsec(enc, string(want))
	if err != nil || !back.Equal(k) {
		t.Errorf("decrypt with the normalised password: %v", err)
	}
}

func TestNcryptsecRoundTrip(t *testing.T) {
	k := mustKey(t, "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a")
	for _, sec := range []byte{KeySecurityInsecure, KeySecuritySecure, KeySecurityUnknown} {
		enc, err := EncryptNcryptsec(k, "correct horse", 6, sec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(enc, "ncryptsec1") {
			t.Fatalf("got %s", enc)
		}
		_, data, _ := bech32Decode(enc)
		if len(data) != 91 || data[0] != 2 || data[1] != 6 || data[42] != sec {
			t.Errorf("layout: %d bytes, version %d, log_n %d, security %d", len(data), data[0], data[1], data[42])
		}
		back, err := DecryptNcryptsec(enc, "correct horse")
		if err != nil || !back.Equal(k) {
			t.Errorf("security %d: round trip: %v", sec, err)
		}
		// The key security byte is authenticated.
		data[42] = (sec + 1) % 3
		if _, err := DecryptNcryptsec(bech32Encode("ncryptsec", data), "correct horse"); err == nil {
			t.Error("a changed key security byte went unnoticed")
		}
	}
}

func TestNcryptsecErrors(t *testing.T) {
	k := mustKey(t, nip04SecA)
	if _, err := EncryptNcryptsec(k, "pw", 23, KeySecurityUnknown); err == nil || !strings.Contains(err.Error(), "log_n 23") {
		t.Errorf("log_n 23: %v", err)
	}
	if _, err := EncryptNcryptsec(k, "pw", 4, 3); err == nil || !strings.Contains(err.Error(), "key security") {
		t.Errorf("key security 3: %v", err)
	}
	good, _ := EncryptNcryptsec(k, "pw", 2, KeySecurityUnknown)
	_, data, _ := bech32Decode(good)
	mutate := func(f func(d []byte) []byte) string {
		d := append([]byte(nil), data...)
		return bech32Encode("ncryptsec", f(d))
	}
	tests := []struct{ name, in, errPart string }{
		{"version 1", mutate(func(d []byte) []byte { d[0] = 1; return d }), "unsupported version"},
		{"huge log_n", mutate(func(d []byte) []byte { d[1] = 40; return d }), "above the supported maximum"},
		{"short", mutate(func(d []byte) []byte { return d[:90] }), "90 bytes"},
		{"tampered ciphertext", mutate(func(d []byte) []byte { d[60] ^= 1; return d }), "wrong password"},
		{"wrong prefix", bech32Encode("nsec", data), "wrong prefix"},
		{"bad checksum", good[:len(good)-1] + map[bool]string{true: "q", false: "p"}[good[len(good)-1] != 'q'], "bad checksum"},
	}
	for _, tt := range tests {
		_, err := DecryptNcryptsec(tt.in, "pw")
		if err == nil {
			t.Errorf("%s: decrypt succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
	}
}
