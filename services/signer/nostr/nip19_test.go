package nostr

import (
	"reflect"
	"strings"
	"testing"
)

// Every example of NIP-19 (and NIP-06's keys, which are NIP-19 too).
func TestNIP19Examples(t *testing.T) {
	npubs := []struct{ bech, hex string }{
		{"npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"},
		{"npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg", "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"},
		{"npub1zutzeysacnf9rru6zqwmxd54mud0k44tst6l70ja5mhv8jjumytsd2x7nu", "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"},
		{"npub16sdj9zv4f8sl85e45vgq9n7nsgt5qphpvmf7vk8r5hhvmdjxx4es8rq74h", "d41b22899549e1f3d335a31002cfd382174006e166d3e658e3a5eecdb6463573"},
	}
	for _, tt := range npubs {
		if got, err := EncodeNpub(tt.hex); err != nil || got != tt.bech {
			t.Errorf("EncodeNpub(%s) = %s, %v; want %s", tt.hex, got, err, tt.bech)
		}
		prefix, v, err := Decode(tt.bech)
		if err != nil || prefix != "npub" || v != tt.hex {
			t.Errorf("Decode(%s) = %s, %v, %v; want npub %s", tt.bech, prefix, v, err, tt.hex)
		}
		if got, err := ParsePublicKey(tt.bech); err != nil || got != tt.hex {
			t.Errorf("ParsePublicKey(%s) = %s, %v", tt.bech, got, err)
		}
		if got, err := ParsePublicKey(strings.ToUpper(tt.hex)); err != nil || got != tt.hex {
			t.Errorf("ParsePublicKey(upper hex) = %s, %v", got, err)
		}
	}
	nsecs := []struct{ bech, hex string }{
		{"nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5", "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"},
		{"nsec10allq0gjx7fddtzef0ax00mdps9t2kmtrldkyjfs8l5xruwvh2dq0lhhkp", "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a"},
		{"nsec1c9wh8xy5eqdzln7n5t0ctgxjcrdug73gp5yj0x03gntn67h83twssdfhel", "c15d739894c81a2fcfd3a2df85a0d2c0dbc47a280d092799f144d73d7ae78add"},
	}
	for _, tt := range nsecs {
		fromHex := mustKey(t, tt.hex)
		if got := EncodeNsec(fromHex); got != tt.bech {
			t.Errorf("EncodeNsec(%s…) = %s, want %s", tt.hex[:8], got, tt.bech)
		}
		fromBech := mustKey(t, tt.bech)
		if !fromBech.Equal(fromHex) {
			t.Errorf("ParseSecretKey(%s) differs from the hex key", tt.bech)
		}
		prefix, v, err := Decode(tt.bech)
		k, ok := v.(*SecretKey)
		if err != nil || prefix != "nsec" || !ok || !k.Equal(fromHex) {
			t.Errorf("Decode(%s) = %s, %T, %v", tt.bech, prefix, v, err)
		}
	}
	const nprofile = "nprofile1qqsrhuxx8l9ex335q7he0f09aej04zpazpl0ne2cgukyawd24mayt8gpp4mhxue69uhhytnc9e3k7mgpz4mhxue69uhkg6nzv9ejuumpv34kytnrdaksjlyr9p"
	want := ProfilePointer{PubKey: "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d", Relays: []string{"wss://r.x.com", "wss://djbas.sadkb.com"}}
	prefix, v, err := Decode(nprofile)
	if err != nil || prefix != "nprofile" || !reflect.DeepEqual(v, want) {
		t.Errorf("Decode(nprofile) = %s, %#v, %v; want %#v", prefix, v, err, want)
	}
	if got, err := EncodeNprofile(want); err != nil || got != nprofile {
		t.Errorf("EncodeNprofile = %s, %v; want %s", got, err, nprofile)
	}
}

func TestNIP19RoundTrips(t *testing.T) {
	id := "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"
	pk := "f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca"
	note, err := EncodeNote(id)
	if err != nil || !strings.HasPrefix(note, "note1") {
		t.Fatalf("EncodeNote = %s, %v", note, err)
	}
	if p, v, err := Decode(note); err != nil || p != "note" || v != id {
		t.Errorf("Decode(note) = %s %v %v", p, v, err)
	}
	kind := 1
	for _, ev := range []EventPointer{
		{ID: id},
		{ID: id, Relays: []string{"wss://nostr.example.com"}, Author: pk, Kind: &kind},
	} {
		s, err := EncodeNevent(ev)
		if err != nil {
			t.Fatal(err)
		}
		p, v, err := Decode(s)
		if err != nil || p != "nevent" || !reflect.DeepEqual(v, ev) {
			t.Errorf("nevent round trip: %s %#v %v, want %#v", p, v, err, ev)
		}
	}
	for _, a := range []EntityPointer{
		{Identifier: "abcd", PubKey: pk, Kind: 30023, Relays: []string{"wss://nostr.example.com"}},
		{Identifier: "", PubKey: pk, Kind: 10002},
	} {
		s, err := EncodeNaddr(a)
		if err != nil {
			t.Fatal(err)
		}
		p, v, err := Decode("nostr:" + s)
		if err != nil || p != "naddr" || !reflect.DeepEqual(v, a) {
			t.Errorf("naddr round trip: %s %#v %v, want %#v", p, v, err, a)
		}
	}
	// Upper case is valid bech32.
	up := strings.ToUpper("npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6")
	if _, v, err := Decode(up); err != nil || v != "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d" {
		t.Errorf("Decode(upper case) = %v, %v", v, err)
	}
	// Unknown TLV types are ignored.
	buf := appendTLV(nil, 0, mustHex(t, pk))
	buf = appendTLV(buf, 99, []byte("future"))
	buf = appendTLV(buf, tlvRelay, []byte("wss://a"))
	if _, v, err := Decode(bech32Encode("nprofile", buf)); err != nil || !reflect.DeepEqual(v, ProfilePointer{PubKey: pk, Relays: []string{"wss://a"}}) {
		t.Errorf("nprofile with an unknown TLV: %#v, %v", v, err)
	}
}

func TestNIP19Errors(t *testing.T) {
	const npub = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"
	pk := mustHex(t, "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d")
	tests := []struct{ name, in, errPart string }{
		{"bad checksum", npub[:len(npub)-1] + "7", "bad checksum"},
		{"typo", strings.Replace(npub, "cvv", "cvw", 1), "bad checksum"},
		{"unknown prefix", bech32Encode("nfoo", pk), "unknown prefix"},
		{"deprecated nrelay", bech32Encode("nrelay", []byte("wss://r")), "unknown prefix"},
		{"ncryptsec", bech32Encode("ncryptsec", make([]byte, 91)), "NIP-49"},
		{"mixed case", "npub180CVV07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", "mixed"},
		{"invalid character", "npub1b0cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", "is not in the bech32 alphabet"},
		{"no separator", "npubqqqqqq", "separator"},
		{"too short", "npub1qqq", "too short"},
		{"too long", "npub1" + strings.Repeat("q", 5000), "too long"},
		{"npub of 31 bytes", bech32Encode("npub", pk[:31]), "31 bytes"},
		{"npub not on curve", bech32Encode("npub", mustHex(t, "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34")), "not a point"},
		{"note of 33 bytes", bech32Encode("note", append(pk, 0)), "33 bytes"},
		{"nsec zero", bech32Encode("nsec", make([]byte, 32)), "out of range"},
		{"nprofile without pubkey", bech32Encode("nprofile", appendTLV(nil, 1, []byte("wss://r"))), "no pubkey"},
		{"nprofile short pubkey", bech32Encode("nprofile", appendTLV(nil, 0, pk[:20])), "20 bytes"},
		{"truncated TLV", bech32Encode("nprofile", append(appendTLV(nil, 0, pk), 1, 10, 'w')), "remain"},
		{"nevent bad kind", bech32Encode("nevent", appendTLV(appendTLV(nil, 0, pk), 3, []byte{1, 2})), "kind"},
		{"naddr without kind", bech32Encode("naddr", appendTLV(appendTLV(nil, 0, nil), 2, pk)), "no kind"},
		{"naddr without author", bech32Encode("naddr", appendTLV(appendTLV(nil, 0, nil), 3, []byte{0, 0, 0, 1})), "no author"},
	}
	for _, tt := range tests {
		_, _, err := Decode(tt.in)
		if err == nil {
			t.Errorf("%s: Decode succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
	}
}

func TestParseSecretKeyErrors(t *testing.T) {
	const nsec = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	tests := []struct{ name, in, errPart string }{
		{"bad checksum", nsec[:len(nsec)-1] + "6", "bad checksum"},
		{"npub given", "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", "wrong prefix \"npub\""},
		{"short hex", "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92f", "wrong length"},
		{"empty", "", "wrong length"},
		{"not hex", strings.Repeat("g", 64), "not hex"},
		{"zero", strings.Repeat("0", 64), "zero"},
		{"n", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", "group order"},
		{"above n", strings.Repeat("f", 64), "group order"},
		{"nsec of 31 bytes", bech32Encode("nsec", make([]byte, 31)), "31 bytes"},
	}
	for _, tt := range tests {
		_, err := ParseSecretKey(tt.in)
		if err == nil {
			t.Errorf("%s: ParseSecretKey succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
		if len(tt.in) > 20 && strings.Contains(err.Error(), tt.in[5:20]) {
			t.Errorf("%s: error %q repeats the input", tt.name, err)
		}
	}
	// n-1 is the largest valid key; surrounding space is ignored.
	if _, err := ParseSecretKey(" fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140\n"); err != nil {
		t.Errorf("n-1: %v", err)
	}
}

func TestParsePublicKeyErrors(t *testing.T) {
	tests := []struct{ name, in, errPart string }{
		{"not on curve", "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34", "not a point"},
		{"above p", "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30", "not a point"},
		{"nsec given", "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5", "secret key"},
		{"note given", "note1tjpa5aa0rhkx6u5gxnye4dv6477jlyg3e9kht8pucfl4ka6zduqq27mn0e", "wrong prefix \"note\""},
		{"short", "abcd", "wrong length"},
		{"not hex", strings.Repeat("z", 64), "not hex"},
		{"bad checksum", "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w7", "bad checksum"},
	}
	for _, tt := range tests {
		_, err := ParsePublicKey(tt.in)
		if err == nil {
			t.Errorf("%s: ParsePublicKey succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hexDecode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSecretKeyErrorsQuoteNoHex: a mistyped hex key whose first letters
// look like a bech32 prefix is not quoted back.
func TestSecretKeyErrorsQuoteNoHex(t *testing.T) {
	key := "deadbeefcafe1aa00000000000000000000000000000000000000000000000001"
	for _, s := range []string{key[:63], key + "0"} {
		_, err := ParseSecretKey(s)
		if err == nil || strings.Contains(err.Error(), "deadbeef") {
			t.Errorf("%d characters: %v", len(s), err)
		}
	}
	if _, err := ParseSecretKey("npubx1qqqq"); err == nil || !strings.Contains(err.Error(), `"npubx"`) {
		t.Errorf("a non-hex prefix is named: %v", err)
	}
}
