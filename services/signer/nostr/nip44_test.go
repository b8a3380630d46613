package nostr

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// nip44Vectors is the official NIP-44 v2 vector file (paulmillr/nip44),
// whose SHA-256 NIP-44 names.
type nip44Vectors struct {
	V2 struct {
		Valid struct {
			GetConversationKey []struct {
				Sec1            string `json:"sec1"`
				Pub2            string `json:"pub2"`
				ConversationKey string `json:"conversation_key"`
			} `json:"get_conversation_key"`
			GetMessageKeys struct {
				ConversationKey string `json:"conversation_key"`
				Keys            []struct {
					Nonce       string `json:"nonce"`
					ChachaKey   string `json:"chacha_key"`
					ChachaNonce string `json:"chacha_nonce"`
					HmacKey     string `json:"hmac_key"`
				} `json:"keys"`
			} `json:"get_message_keys"`
			CalcPaddedLen  [][2]uint64 `json:"calc_padded_len"`
			EncryptDecrypt []struct {
				Sec1            string `json:"sec1"`
				Sec2            string `json:"sec2"`
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Plaintext       string `json:"plaintext"`
				Payload         string `json:"payload"`
			} `json:"encrypt_decrypt"`
			EncryptDecryptLongMsg []struct {
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Pattern         string `json:"pattern"`
				Repeat          int    `json:"repeat"`
				PlaintextSHA256 string `json:"plaintext_sha256"`
				PayloadSHA256   string `json:"payload_sha256"`
			} `json:"encrypt_decrypt_long_msg"`
		} `json:"valid"`
		Invalid struct {
			EncryptMsgLengths  []int `json:"encrypt_msg_lengths"`
			GetConversationKey []struct {
				Sec1 string `json:"sec1"`
				Pub2 string `json:"pub2"`
				Note string `json:"note"`
			} `json:"get_conversation_key"`
			Decrypt []struct {
				ConversationKey string `json:"conversation_key"`
				Nonce           string `json:"nonce"`
				Plaintext       string `json:"plaintext"`
				Payload         string `json:"payload"`
				Note            string `json:"note"`
			} `json:"decrypt"`
		} `json:"invalid"`
	} `json:"v2"`
}

const nip44VectorsPath = "../../../../../shared/testdata/nip44/nip44.vectors.json"

func loadNip44Vectors(t *testing.T) *nip44Vectors {
	t.Helper()
	path := nip44VectorsPath
	if p := os.Getenv("NIP44_VECTORS"); p != "" {
		path = p
	}
	b, err := os.ReadFile(path)
	if err != nil {
		// /work/shared is outside the repository; fall back to its absolute path.
		if b, err = os.ReadFile("/work/shared/testdata/nip44/nip44.vectors.json"); err != nil {
			t.Fatalf("reading the NIP-44 vectors (set NIP44_VECTORS to the file): %v", err)
		}
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != "269ed0f69e4c192512cc779e78c555090cebc7c785b609e338a62afc3ce25040" {
		t.Fatalf("nip44.vectors.json has SHA-256 %x, not the one NIP-44 names", sum)
	}
	var v nip44Vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func key32(t *testing.T, s string) (k [32]byte) {
	t.Helper()
	if n, err := hex.Decode(k[:], []byte(s)); err != nil || n != 32 {
		t.Fatalf("bad 32-byte hex %q: %v", s, err)
	}
	return k
}

func TestNip44ConversationKeys(t *testing.T) {
	v := loadNip44Vectors(t)
	if len(v.V2.Valid.GetConversationKey) == 0 {
		t.Fatal("no vectors")
	}
	for i, tt := range v.V2.Valid.GetConversationKey {
		ck, err := ConversationKey(mustKey(t, tt.Sec1), tt.Pub2)
		if err != nil {
			t.Errorf("vector %d: %v", i, err)
			continue
		}
		if got := hex.EncodeToString(ck[:]); got != tt.ConversationKey {
			t.Errorf("vector %d: conversation key %s, want %s", i, got, tt.ConversationKey)
		}
	}
	for _, tt := range v.V2.Invalid.GetConversationKey {
		k, err := ParseSecretKey(tt.Sec1)
		if err == nil {
			_, err = ConversationKey(k, tt.Pub2)
		}
		part := "not a point on secp256k1"
		if strings.HasPrefix(tt.Note, "sec1") {
			part = "secret key is out of range"
		}
		if err == nil {
			t.Errorf("%s: no error", tt.Note)
		} else if !strings.Contains(err.Error(), part) {
			t.Errorf("%s: error %q does not say %q", tt.Note, err, part)
		}
	}
}

func TestNip44MessageKeys(t *testing.T) {
	v := loadNip44Vectors(t)
	mk := v.V2.Valid.GetMessageKeys
	ck := key32(t, mk.ConversationKey)
	for i, tt := range mk.Keys {
		nonce := key32(t, tt.Nonce)
		a, b, c, err := nip44MessageKeys(ck, nonce[:])
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(a) != tt.ChachaKey || hex.EncodeToString(b) != tt.ChachaNonce || hex.EncodeToString(c) != tt.HmacKey {
			t.Errorf("vector %d: keys %x %x %x, want %s %s %s", i, a, b, c, tt.ChachaKey, tt.ChachaNonce, tt.HmacKey)
		}
	}
	if len(mk.Keys) == 0 {
		t.Fatal("no vectors")
	}
}

func TestNip44PaddedLen(t *testing.T) {
	v := loadNip44Vectors(t)
	for _, tt := range v.V2.Valid.CalcPaddedLen {
		if got := nip44PaddedLen(tt[0]); got != tt[1] {
			t.Errorf("calc_padded_len(%d) = %d, want %d", tt[0], got, tt[1])
		}
	}
	// Beyond the file: 64-bit arithmetic up to the maximum.
	if got := nip44PaddedLen(1<<32 - 1); got != 1<<32 {
		t.Errorf("calc_padded_len(2^32-1) = %d, want 2^32", got)
	}
	if got := nip44PaddedLen(65537); got != 81920 {
		t.Errorf("calc_padded_len(65537) = %d, want 81920", got)
	}
}

func TestNip44EncryptDecrypt(t *testing.T) {
	v := loadNip44Vectors(t)
	for i, tt := range v.V2.Valid.EncryptDecrypt {
		k1, k2 := mustKey(t, tt.Sec1), mustKey(t, tt.Sec2)
		ck, err := ConversationKey(k1, k2.PublicKey())
		if err != nil || hex.EncodeToString(ck[:]) != tt.ConversationKey {
			t.Fatalf("vector %d: conversation key %x, %v", i, ck, err)
		}
		payload, err := Nip44EncryptWithNonce(tt.Plaintext, ck, key32(t, tt.Nonce))
		if err != nil {
			t.Fatal(err)
		}
		if payload != tt.Payload {
			t.Errorf("vector %d: payload\n got %s\nwant %s", i, payload, tt.Payload)
		}
		ck2, err := ConversationKey(k2, k1.PublicKey())
		if err != nil || ck2 != ck {
			t.Fatalf("vector %d: reverse conversation key differs: %v", i, err)
		}
		plain, err := Nip44Decrypt(tt.Payload, ck2)
		if err != nil || plain != tt.Plaintext {
			t.Errorf("vector %d: decrypt = %q, %v; want %q", i, plain, err, tt.Plaintext)
		}
	}
	// Random nonces: round trip, and two encryptions differ.
	ck := key32(t, v.V2.Valid.EncryptDecrypt[0].ConversationKey)
	a, _ := Nip44Encrypt("hello", ck)
	b, _ := Nip44Encrypt("hello", ck)
	if a == b {
		t.Error("two encryptions with random nonces are equal")
	}
	if p, err := Nip44Decrypt(a, ck); err != nil || p != "hello" {
		t.Errorf("round trip: %q, %v", p, err)
	}
}

func TestNip44LongMessages(t *testing.T) {
	v := loadNip44Vectors(t)
	type long struct {
		ck, nonce, pattern string
		repeat             int
		plainSum, paySum   string
	}
	var tests []long
	for _, tt := range v.V2.Valid.EncryptDecryptLongMsg {
		tests = append(tests, long{tt.ConversationKey, tt.Nonce, tt.Pattern, tt.Repeat, tt.PlaintextSHA256, tt.PayloadSHA256})
	}
	// NIP-44's table of extended length prefix vectors.
	const ck0 = "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d"
	const n1 = "0000000000000000000000000000000000000000000000000000000000000001"
	tests = append(tests,
		long{ck0, n1, "a", 65535, "6e1bebca6a8229364a162a72ef064826c4cd7457bf54f190ef782bd9deff3e42", "6d8c2810d1e870fbaa1f0a0937126cca837a15f9260e27060c331d70a3c0bc84"},
		long{ck0, n1, "a", 65536, "bf718b6f653bebc184e1479f1935b8da974d701b893afcf49e701f3e2f9f9c5a", "b7b4edb36ba92e267d322d56d9aebc22e7fa96ff52e3c12adc07f07a43cbc616"},
		long{ck0, n1, "a", 65537, "008ffc88d3c96a9f307524eb361e47c5222a887fc45fa0c1fb8d429c5c23b430", "eeb7c7c5373894ea2c1547cfd3ccb15d5a0b2d619da852e5c79df792dcc9e435"},
	)
	for _, tt := range tests {
		plain := strings.Repeat(tt.pattern, tt.repeat)
		if sum := sha256.Sum256([]byte(plain)); hex.EncodeToString(sum[:]) != tt.plainSum {
			t.Fatalf("%q×%d: plaintext sha256 %x, want %s", tt.pattern, tt.repeat, sum, tt.plainSum)
		}
		ck := key32(t, tt.ck)
		payload, err := Nip44EncryptWithNonce(plain, ck, key32(t, tt.nonce))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256([]byte(payload)); hex.EncodeToString(sum[:]) != tt.paySum {
			t.Errorf("%q×%d: payload sha256 %x, want %s", tt.pattern, tt.repeat, sum, tt.paySum)
		}
		if back, err := Nip44Decrypt(payload, ck); err != nil || back != plain {
			t.Errorf("%q×%d: decrypt failed: %v", tt.pattern, tt.repeat, err)
		}
	}
}

func TestNip44InvalidDecrypt(t *testing.T) {
	v := loadNip44Vectors(t)
	want := map[string]string{ // the vector's note → what our error says
		"unknown encryption version":   "unknown encryption version",
		"unknown encryption version 0": "unknown encryption version 0",
		"invalid base64":               "invalid base64",
		"invalid MAC":                  "invalid MAC",
		"invalid padding":              "invalid padding",
		"invalid payload length: 0":    "unknown encryption version", // empty payload: the spec's decode_payload says so too
		"invalid payload length: 4":    "invalid payload size",
		"invalid payload length: 48":   "invalid payload size",
		"invalid payload length: 92":   "invalid payload size",
	}
	if len(v.V2.Invalid.Decrypt) == 0 {
		t.Fatal("no vectors")
	}
	for i, tt := range v.V2.Invalid.Decrypt {
		_, err := Nip44Decrypt(tt.Payload, key32(t, tt.ConversationKey))
		if err == nil {
			t.Errorf("vector %d (%s): decrypt succeeded", i, tt.Note)
			continue
		}
		part, ok := want[tt.Note]
		if !ok {
			t.Errorf("vector %d: unexpected note %q (error %v)", i, tt.Note, err)
		} else if !strings.Contains(err.Error(), part) {
			t.Errorf("vector %d (%s): error %q does not say %q", i, tt.Note, err, part)
		}
	}
}

// The vector file's invalid.encrypt_msg_lengths is [0, 65536, 100000,
// 10000000]: it predates NIP-44's extended length prefix. The NIP as
// published (and its extended-prefix vectors, tested above) makes every
// length from 1 to 2^32-1 valid, so only 0 must fail; the others must
// round-trip with the 6-byte prefix.
func TestNip44MessageLengths(t *testing.T) {
	v := loadNip44Vectors(t)
	ck := key32(t, "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d")
	for _, n := range v.V2.Invalid.EncryptMsgLengths {
		plain := strings.Repeat("a", n)
		payload, err := Nip44Encrypt(plain, ck)
		if n == 0 {
			if err == nil {
				t.Error("an empty plaintext was encrypted")
			}
			continue
		}
		if err != nil {
			t.Errorf("length %d: %v", n, err)
			continue
		}
		data, _ := base64.StdEncoding.DecodeString(payload)
		if want := 1 + 32 + 6 + int(nip44PaddedLen(uint64(n))) + 32; len(data) != want {
			t.Errorf("length %d: payload is %d bytes, want %d (with the 6-byte prefix)", n, len(data), want)
		}
		if back, err := Nip44Decrypt(payload, ck); err != nil || back != plain {
			t.Errorf("length %d: round trip failed: %v", n, err)
		}
	}
	// A u16 length of 0 followed by an extended length below 65536 is invalid padding.
	if _, err := nip44Unpad(append([]byte{0, 0, 0, 0, 0, 5}, make([]byte, 32)...)); err == nil || !strings.Contains(err.Error(), "invalid padding") {
		t.Errorf("small extended length: %v", err)
	}
}
