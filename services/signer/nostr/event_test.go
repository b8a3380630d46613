package nostr

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// The id below was computed independently (Python: sha256 of
// json.dumps([...], separators=(',',':'), ensure_ascii=False)), whose
// escaping equals NIP-01's for these characters.
func TestEventIDKnown(t *testing.T) {
	e := &Event{
		PubKey:    "84bf7562262bbd6940085748f3be6afa52ae317155181ece31b66351ccffa4b0",
		CreatedAt: 1700000000,
		Kind:      1,
		Tags: [][]string{
			{"e", "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36", "wss://nostr.example.com"},
			{"t", "nostr"},
			{},
		},
		Content: "line1\nline2\t\"quoted\" back\\slash café 🌍 \r end",
	}
	wantSer := `[0,"84bf7562262bbd6940085748f3be6afa52ae317155181ece31b66351ccffa4b0",1700000000,1,[["e","5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36","wss://nostr.example.com"],["t","nostr"],[]],"line1\nline2\t\"quoted\" back\\slash café 🌍 \r end"]`
	if got := string(e.Serialize()); got != wantSer {
		t.Fatalf("Serialize:\n got %s\nwant %s", got, wantSer)
	}
	if got, want := e.ComputeID(), "a6ab6e2d395b5738dba1a0afde2d448cc48afb4c30f10e47f72be2e0e716d3b7"; got != want {
		t.Fatalf("ComputeID = %s, want %s", got, want)
	}
}

// NIP-01 escapes exactly seven characters; everything else is verbatim.
func TestSerializeEscaping(t *testing.T) {
	tests := []struct{ content, want string }{
		{"\n", `\n`},
		{`"`, `\"`},
		{`\`, `\\`},
		{"\r", `\r`},
		{"\t", `\t`},
		{"\b", `\b`},
		{"\f", `\f`},
		{"\x00\x01\x1f\x7f", "\x00\x01\x1f\x7f"}, // other control characters: verbatim, not \u00XX
		{"\u2028\u2029", "\u2028\u2029"},         // verbatim (encoding/json would escape them)
		{"<>&", "<>&"},                           // verbatim (encoding/json would escape them)
		{"/", "/"},
		{"ünï 🦄", "ünï 🦄"},
	}
	for _, tt := range tests {
		e := &Event{PubKey: "ab", Kind: 1, Content: tt.content, Tags: [][]string{{tt.content}}}
		want := `[0,"ab",0,1,[["` + tt.want + `"]],"` + tt.want + `"]`
		if got := string(e.Serialize()); got != want {
			t.Errorf("content %q: Serialize = %q, want %q", tt.content, got, want)
		}
	}
	// nil tags serialize as [].
	e := &Event{PubKey: "ab", CreatedAt: -5, Kind: 30023}
	if got, want := string(e.Serialize()), `[0,"ab",-5,30023,[],""]`; got != want {
		t.Errorf("nil tags: Serialize = %s, want %s", got, want)
	}
}

func TestEventMarshalJSONTags(t *testing.T) {
	b, err := json.Marshal(Event{Kind: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tags":[]`) {
		t.Errorf("nil tags marshal as %s, want \"tags\":[]", b)
	}
}

func TestSignAndVerifyEvent(t *testing.T) {
	k := mustKey(t, "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a")
	e := &Event{CreatedAt: 1700000000, Kind: 1, Tags: [][]string{{"p", "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"}}, Content: "hello \"nostr\"\n"}
	if err := SignEvent(k, e); err != nil {
		t.Fatal(err)
	}
	if e.PubKey != "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917" {
		t.Errorf("PubKey = %s", e.PubKey)
	}
	if e.ID != e.ComputeID() || len(e.Sig) != 128 {
		t.Fatalf("id %s sig %s", e.ID, e.Sig)
	}
	if err := VerifyEvent(e); err != nil {
		t.Fatalf("a freshly signed event does not verify: %v", err)
	}
	// The event survives a JSON round trip.
	b, _ := json.Marshal(e)
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := VerifyEvent(&back); err != nil {
		t.Fatalf("after JSON round trip: %v", err)
	}
	// Aux randomness: two signatures of the same event differ, both valid.
	e2 := *e
	if err := SignEvent(k, &e2); err != nil {
		t.Fatal(err)
	}
	if e2.Sig == e.Sig {
		t.Error("two signatures are identical: aux randomness not used")
	}

	flip := func(s string) string {
		b := []byte(s)
		if b[10] == '0' {
			b[10] = '1'
		} else {
			b[10] = '0'
		}
		return string(b)
	}
	other := mustKey(t, "c15d739894c81a2fcfd3a2df85a0d2c0dbc47a280d092799f144d73d7ae78add")
	tampered := []struct {
		name    string
		mutate  func(*Event)
		errPart string
	}{
		{"content", func(e *Event) { e.Content += "!" }, "does not match"},
		{"tag", func(e *Event) { e.Tags[0][1] = flip(e.Tags[0][1]) }, "does not match"},
		{"created_at", func(e *Event) { e.CreatedAt++ }, "does not match"},
		{"kind", func(e *Event) { e.Kind = 7 }, "does not match"},
		{"id recomputed after tampering", func(e *Event) { e.Content = "x"; e.ID = e.ComputeID() }, "not a valid signature"},
		{"sig", func(e *Event) { e.Sig = flip(e.Sig) }, "sig"},
		{"sig s part", func(e *Event) { b := []byte(e.Sig); b[100] ^= 1; e.Sig = string(b) }, "sig"},
		{"sig by another key", func(e *Event) { o := *e; _ = SignEvent(other, &o); e.Sig = o.Sig }, "not a valid signature"},
		{"pubkey of another key", func(e *Event) { e.PubKey = other.PublicKey(); e.ID = e.ComputeID() }, "not a valid signature"},
		{"upper-case id", func(e *Event) { e.ID = strings.ToUpper(e.ID) }, "lowercase hex"},
		{"short sig", func(e *Event) { e.Sig = e.Sig[:126] }, "128 lowercase hex"},
		{"pubkey off the curve", func(e *Event) {
			e.PubKey = "eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34"
			e.ID = e.ComputeID()
		}, "not a point"},
	}
	for _, tt := range tampered {
		c := *e
		c.Tags = [][]string{append([]string(nil), e.Tags[0]...)}
		tt.mutate(&c)
		err := VerifyEvent(&c)
		if err == nil {
			t.Errorf("%s tampered: VerifyEvent succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s tampered: error %q does not say %q", tt.name, err, tt.errPart)
		}
	}
}

// BIP-340 test vectors (bitcoin/bips bip-0340/test-vectors.csv, as
// embedded in btcec's tests): signing with the given aux randomness gives
// exactly the signature; verify accepts the valid ones and rejects the
// others.
func TestBIP340Vectors(t *testing.T) {
	tests := []struct {
		index                   int
		sec, pub, aux, msg, sig string
		valid                   bool
	}{
		{0, "0000000000000000000000000000000000000000000000000000000000000003", "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9", "0000000000000000000000000000000000000000000000000000000000000000", "0000000000000000000000000000000000000000000000000000000000000000", "E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0", true},
		{1, "B7E151628AED2A6ABF7158809CF4F3C762E7160F38B4DA56A784D9045190CFEF", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "0000000000000000000000000000000000000000000000000000000000000001", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A", true},
		{2, "C90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B14E5C9", "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8", "C87AA53824B4D7AE2EB035A2B5BBBCCC080E76CDC6D1692C4B0B62D798E6D906", "7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C", "5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7", true},
		{3, "0B432B2677937381AEF05BB02A66ECD012773062CF3FA2549E44F58ED2401710", "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3", true},
		{4, "", "D69C3509BB99E412E68B0FE8544E72837DFA30746D8BE2AA65975F29D22DC7B9", "", "4DF3C3F68FCC83B27E9D42C90431A72499F17875C81A599B566C9889B9696703", "00000000000000000000003B78CE563F89A0ED9414F5AA28AD0D96D6795F9C6376AFB1548AF603B3EB45C9F8207DEE1060CB71C04E80F593060B07D28308D7F4", true},
		{5, "", "EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},  // public key not on the curve
		{6, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A14602975563CC27944640AC607CD107AE10923D9EF7A73C643E166BE5EBEAFA34B1AC553E2", false},  // has_even_y(R) is false
		{7, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "1FA62E331EDBC21C394792D2AB1100A7B432B013DF3F6FF4F99FCB33E0E1515F28890B3EDB6E7189B630448B515CE4F8622A954CFE545735AAEA5134FCCDB2BD", false},  // negated message
		{8, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769961764B3AA9B2FFCB6EF947B6887A226E8D7C93E00C5ED0C1834FF0D0C2E6DA6", false},  // negated s
		{11, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "4A298DACAE57395A15D0795DDBFD1DCB564DA82B0F269BC70A74F8220429BA1D69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false}, // sig[0:32] is not an X coordinate on the curve
		{9, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "0000000000000000000000000000000000000000000000000000000000000000123DDA8328AF9C23A94C1FEECFD123BA4FB73476F0D594DCB65C6425BD186051", false},  // infinite R
		{10, "", "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "00000000000000000000000000000000000000000000000000000000000000017615FBAF5AE28864013C099742DEADB4DBA87F11AC6754F93780D5A1837CF197", false}, // infinite R
		{14, "", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC30", "", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false}, // public key exceeds the field size
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.index), func(t *testing.T) {
			msg, _ := hex.DecodeString(tt.msg)
			pub, sig := strings.ToLower(tt.pub), strings.ToLower(tt.sig)
			if tt.sec != "" {
				k := mustKey(t, tt.sec)
				if got := k.PublicKey(); got != pub {
					t.Errorf("PublicKey = %s, want %s", got, pub)
				}
				var aux [32]byte
				hex.Decode(aux[:], []byte(tt.aux))
				got, err := signHashAux(k, msg, aux)
				if err != nil {
					t.Fatal(err)
				}
				if got != sig {
					t.Errorf("signature\n got %s\nwant %s", got, sig)
				}
			}
			err := VerifySignature(pub, msg, sig)
			if tt.valid && err != nil {
				t.Errorf("valid signature rejected: %v", err)
			}
			if !tt.valid && err == nil {
				t.Error("invalid signature accepted")
			}
		})
	}
}

func TestSecretKeyNeverPrints(t *testing.T) {
	k := mustKey(t, "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa")
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("key", "k", k)
	js, _ := json.Marshal(struct{ K *SecretKey }{k})
	outs := []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %X %q %d", k, k, k, k, k, k, k, k),
		fmt.Sprintf("%v", []*SecretKey{k}), logged.String(), string(js),
	}
	for _, out := range outs {
		low := strings.ToLower(out)
		if strings.Contains(low, "67dea2ed") || strings.Contains(low, "nsec1") || strings.Contains(low, "67 222") {
			t.Errorf("output leaks the key: %s", out)
		}
		if !strings.Contains(out, "[secret key]") {
			t.Errorf("output %q does not say [secret key]", out)
		}
	}
}

func TestWipe(t *testing.T) {
	k := mustKey(t, "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa")
	k.Wipe()
	if k.b != [32]byte{} {
		t.Error("Wipe left key bytes")
	}
	if k.PublicKey() != "" || EncodeNsec(k) != "" {
		t.Error("a wiped key still has a public key or an nsec")
	}
	if err := SignEvent(k, &Event{Kind: 1}); err == nil {
		t.Error("a wiped key signed an event")
	}
	if _, err := ConversationKey(k, "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"); err == nil {
		t.Error("a wiped key computed a conversation key")
	}
	var nilKey *SecretKey
	if err := SignEvent(nilKey, &Event{}); err == nil {
		t.Error("a nil key signed")
	}
}

func mustKey(t testing.TB, s string) *SecretKey {
	t.Helper()
	k, err := ParseSecretKey(s)
	if err != nil {
		t.Fatalf("ParseSecretKey: %v", err)
	}
	return k
}

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }

func hexString(b []byte) string { return hex.EncodeToString(b) }

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
