package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Real vectors.
const (
	// nsecNIP19 is the private key of the NIP-19 examples, and hexNIP19
	// the same key in hex.
	nsecNIP19 = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	hexNIP19  = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	// npubHex is the public key of the NIP-19 examples (not secret).
	npubHex = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
	npub    = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	// ncryptsecNIP49 is the test vector of NIP-49 (password "nostr").
	ncryptsecNIP49 = "ncryptsec1qgg9947rlpvqu76pj5ecreduf9jxhselq2nae2kghhvd5g7dgjtcxfqtd67p9m0w57lspw8gsq6yphnm8623nsl8xn9j4jdzz84zm3frztj3z7s35vpzmqf6ksu8r89qk5z2zxfmu5gv8th8wclt0h4p"
	// The mnemonics of the NIP-06 test vectors.
	mnemonic12 = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	mnemonic24 = "what bleak badge arrange retreat wolf trade produce cricket blur garlic valid proud rude strong choose busy staff weather area salt hollow arm fade"
	bunkerURL  = "bunker://" + npubHex + "?relay=wss://relay.example.com&secret=abcd1234"
)

func TestWordlist(t *testing.T) {
	sum := sha256.Sum256([]byte(englishList))
	if got := hex.EncodeToString(sum[:]); got != "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda" {
		t.Errorf("english.txt has SHA-256 %s, not that of bitcoin/bips bip-0039/english.txt", got)
	}
	list := strings.Split(strings.TrimSuffix(englishList, "\n"), "\n")
	if len(list) != 2048 || list[0] != "abandon" || list[2047] != "zoo" {
		t.Errorf("the list has %d words, %q to %q; want 2048, abandon to zoo", len(list), list[0], list[len(list)-1])
	}
	n := 0
	for _, k := range wordTable {
		if k != 0 {
			n++
		}
	}
	if n != 2048 {
		t.Errorf("%d distinct packed words, want 2048", n)
	}
	for _, w := range strings.Fields(mnemonic24 + " " + mnemonic12) {
		if !isWord(w) || !isWord(strings.ToUpper(w)) {
			t.Errorf("%q is not found in the list", w)
		}
	}
	for _, w := range []string{"the", "a", "of", "and", "to", "is", "in", "zoos", "abando", "", "abandonx", "aband0n"} {
		if isWord(w) {
			t.Errorf("%q is taken for a BIP-39 word", w)
		}
	}
}

func TestIsSecretName(t *testing.T) {
	secret := []string{
		"password", "Password", "PASSWORD", "passwd", "pwd", "pass", "new_password", "newPassword",
		"new-password", "current-password", "confirmPassword", "user[password]", "--password",
		"passphrase", "passcode", "secret", "client_secret", "clientSecret", "bunker_secret",
		"secret_key", "secrets", "nsec", "NSEC", "nsecKey", "nsec_key", "ncryptsec",
		"private_key", "privateKey", "PrivateKey", "privatekey", "privkey", "priv_key_hex"[:8],
		"mnemonic", "mnemonicWords", "seed", "seed_phrase", "seedPhrase", "seed_words", "words",
		"token", "access_token", "accessToken", "refresh_token", "id_token", "csrfToken", "APIToken",
		"api_key", "apiKey", "apikey", "X-Api-Key", "x-api-key", "authorization", "Authorization",
		"auth", "cookie", "Set-Cookie", "credentials", "pin", "otp", "totp", "random_seed",
	}
	plain := []string{
		"key", "Key", "url", "value", "ref", "target", "selector", "script", "attr", "direction",
		"amount", "index", "ms", "timeout", "format", "quality", "full_page", "interactive",
		"insecure", "token_count", "max_tokens", "tokens_used", "keyboard", "public_key", "pubkey",
		"npub", "author", "words_count", "spinner", "pinned", "passage", "bypass", "compass",
		"session_id", "relay", "type", "name", "", strings.Repeat("a", 200) + "password",
	}
	for _, n := range secret {
		if !IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = false, want true", n)
		}
	}
	for _, n := range plain {
		if IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = true, want false", n)
		}
	}
}

// TestNamesDocumented: the package documentation lists every secret name
// rule.
func TestNamesDocumented(t *testing.T) {
	src, err := os.ReadFile("redact.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src[:bytes.Index(src, []byte("package redact"))])
	for _, list := range [][]string{nameContains, nameWords, nameLastWords, nameExact} {
		for _, s := range list {
			if !regexp.MustCompile(`\b` + s + `\b`).MatchString(doc) {
				t.Errorf("the package documentation does not list %q", s)
			}
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"nsec", "my key is " + nsecNIP19 + ".", "my key is [redacted]."},
		{"nsec_nostr_uri", "nostr:" + nsecNIP19, "nostr:[redacted]"},
		{"nsec_upper", strings.ToUpper(nsecNIP19), "[redacted]"},
		{"nsec_twice", nsecNIP19 + "\n" + nsecNIP19, "[redacted]\n[redacted]"},
		{"nsec_too_short", "nsec1vl029mgpspedva04g90", "nsec1vl029mgpspedva04g90"},
		{"ncryptsec", "backup: " + ncryptsecNIP49 + " (log_n 16)", "backup: [redacted] (log_n 16)"},
		{"mnemonic12", "words: " + mnemonic12, "words: [redacted]"},
		{"mnemonic12_in_sentence", "Your phrase is " + mnemonic12 + ". Keep it safe.", "Your phrase is [redacted]. Keep it safe."},
		{"mnemonic24_lines", strings.ReplaceAll(mnemonic24, " ", "\n"), "[redacted]"},
		{"mnemonic24_capitalized", "Seed: " + strings.ToUpper(mnemonic24[:1]) + mnemonic24[1:], "Seed: [redacted]"},
		{"eleven_words", "leader monkey parrot ring guide accident before fence cannon height naive", "leader monkey parrot ring guide accident before fence cannon height naive"},
		{"words_broken_by_punctuation", "leader monkey parrot ring guide accident, before fence cannon height naive bean", "leader monkey parrot ring guide accident, before fence cannon height naive bean"},
		{"words_glued_to_digits", "leader monkey parrot ring guide accident before fence cannon height naive bean2", "leader monkey parrot ring guide accident before fence cannon height naive bean2"},
		{"bunker", bunkerURL, "bunker://" + npubHex + "?relay=wss://relay.example.com&secret=[redacted]"},
		{"bunker_secret_first", "bunker://" + npubHex + "?secret=abcd1234&relay=wss://relay.example.com", "bunker://" + npubHex + "?secret=[redacted]&relay=wss://relay.example.com"},
		{"nostrconnect", "nostrconnect://" + npubHex + "?relay=wss%3A%2F%2Frelay.example.com&secret=0s8j2djs&perms=sign_event", "nostrconnect://" + npubHex + "?relay=wss%3A%2F%2Frelay.example.com&secret=[redacted]&perms=sign_event"},
		{"query_token", "https://example.com/cb#access_token=ya29.abc&expires_in=3600", "https://example.com/cb#access_token=[redacted]&expires_in=3600"},
		{"cookie", "session_token=abc123; Path=/; HttpOnly", "session_token=[redacted]; Path=/; HttpOnly"},
		{"flag", "login --password=hunter2 --user ada", "login --password=[redacted] --user ada"},
		{"json_in_text", `{"user":"ada","password":"hunter2","pin":1234,"remember":true}`, `{"user":"ada","password":"[redacted]","pin":[redacted],"remember":true}`},
		{"json_escaped_in_text", `{\"password\":\"hunter2\",\"user\":\"ada\"}`, `{\"password\":\"[redacted]\",\"user\":\"ada\"}`},
		{"js_object", `login({user: 'ada', password: 'hunter 2'})`, `login({user: 'ada', password: '[redacted]'})`},
		{"js_assignment", `document.querySelector('#pw').password = "hunter2";`, `document.querySelector('#pw').password = "[redacted]";`},
		{"js_field_value", `passwordField.value = 'hunter2'`, `passwordField.value = '[redacted]'`},
		{"js_comparison", `if (password === "hunter2") ok()`, `if (password === "[redacted]") ok()`},
		{"js_call_kept", `const password = getPassword();`, `const password = getPassword();`},
		{"header", "Authorization: Bearer eyJhbGciOi.x.y\nAccept: */*", "Authorization: [redacted]\nAccept: */*"},
		{"prose_label", "Password: hunter2", "Password: [redacted]"},
		{"private_key_hex", "privkey=" + hexNIP19, "privkey=[redacted]"},
		// Not secret.
		{"hex_alone", "event " + hexNIP19 + " by " + npubHex, "event " + hexNIP19 + " by " + npubHex},
		{"npub", "follow " + npub, "follow " + npub},
		{"url", "https://example.com/search?q=password+reset&page=2", "https://example.com/search?q=password+reset&page=2"},
		{"snapshot", "- textbox \"Password\" [ref=e5]: ••••\n- button \"Sign in\" [ref=e6]\n- link \"Forgot password?\" [ref=e7]:\n  - /url: /reset", "- textbox \"Password\" [ref=e5]: ••••\n- button \"Sign in\" [ref=e6]\n- link \"Forgot password?\" [ref=e7]:\n  - /url: /reset"},
		{"selector", `input[type=password], [autocomplete=current-password]`, `input[type=password], [autocomplete=current-password]`},
		{"booleans", `"password_visible": false, "secret": null`, `"password_visible": false, "secret": null`},
		{"prose", "Then the committee will review the budget and approve the plan before the end of the year.", "Then the committee will review the budget and approve the plan before the end of the year."},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q)\n = %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"password", `{"ref":"e5","value":"x","password":"hunter2"}`, `{"ref":"e5","value":"x","password":"[redacted]"}`},
		{"name_variants", `{"newPassword":"a","new-password":"b","NEW_PASSWORD":"c","pass_word":"d"}`, `{"newPassword":"[redacted]","new-password":"[redacted]","NEW_PASSWORD":"[redacted]","pass_word":"[redacted]"}`},
		{"any_type", `{"pin":1234,"secret":{"a":[1,2]},"words":["abandon","ability"],"token":-1.5e3}`, `{"pin":"[redacted]","secret":"[redacted]","words":"[redacted]","token":"[redacted]"}`},
		{"kept_empty", `{"password":"","secret":null,"token":false,"pin":true}`, `{"password":"","secret":null,"token":false,"pin":true}`},
		{"private_key_hex", `{"private_key":"` + hexNIP19 + `","pubkey":"` + npubHex + `"}`, `{"private_key":"[redacted]","pubkey":"` + npubHex + `"}`},
		{"key_hex_kept", `{"key":"` + hexNIP19 + `"}`, `{"key":"` + hexNIP19 + `"}`},
		{"nested", `{"a":{"b":[{"c":{"apiKey":"k-123"}},{"d":"` + nsecNIP19 + `"}]},"e":[["` + mnemonic12 + `"]]}`, `{"a":{"b":[{"c":{"apiKey":"[redacted]"}},{"d":"[redacted]"}]},"e":[["[redacted]"]]}`},
		{"nsec_in_value", `{"ref":"e3","value":"` + nsecNIP19 + `"}`, `{"ref":"e3","value":"[redacted]"}`},
		{"nsec_in_script", `{"script":"localStorage.setItem('k', '` + nsecNIP19 + `')"}`, `{"script":"localStorage.setItem('k', '[redacted]')"}`},
		{"nsec_in_key", `{"` + nsecNIP19 + `":1}`, `{"[redacted]":1}`},
		{"nsec_escaped", `{"value":"\u006esec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"}`, `{"value":"[redacted]"}`},
		{"mnemonic_escaped_lines", `{"value":"` + strings.ReplaceAll(mnemonic24, " ", `\n`) + `","note":"x\ty"}`, `{"value":"[redacted]","note":"x\ty"}`},
		{"escapes_kept_around", `{"script":"a\n\"b\"\u00e9\/ ` + nsecNIP19 + `"}`, `{"script":"a\n\"b\"é/ [redacted]"}`},
		{"bunker", `{"url":"` + bunkerURL + `"}`, `{"url":"bunker://` + npubHex + `?relay=wss://relay.example.com&secret=[redacted]"}`},
		{"bunker_secret_name", `{"bunker_secret":"abcd1234"}`, `{"bunker_secret":"[redacted]"}`},
		{"top_level_array", `[{"password":"x"}, "` + nsecNIP19 + `"]`, `[{"password":"[redacted]"}, "[redacted]"]`},
		{"top_level_string", `"` + nsecNIP19 + `"`, `"[redacted]"`},
		{"whitespace_kept", "{\n  \"password\" : \"x\" ,\n  \"n\": 1.50\n}\n", "{\n  \"password\" : \"[redacted]\" ,\n  \"n\": 1.50\n}\n"},
		// Not secret.
		{"press", `{"key":"Enter"}`, `{"key":"Enter"}`},
		{"open", `{"url":"https://example.com/login?next=%2Fhome&lang=en"}`, `{"url":"https://example.com/login?next=%2Fhome&lang=en"}`},
		{"fill", `{"ref":"e12","value":"Ada Lovelace"}`, `{"ref":"e12","value":"Ada Lovelace"}`},
		{"eval", `{"script":"document.querySelector(\"input[type=password]\").focus()"}`, `{"script":"document.querySelector(\"input[type=password]\").focus()"}`},
		{"numbers", `{"amount":500,"x":-0.5e-3,"y":[0,1E+2]}`, `{"amount":500,"x":-0.5e-3,"y":[0,1E+2]}`},
		{"empty_object", `{}`, `{}`},
		// Invalid JSON: the text rules.
		{"invalid", `{"password":"hunter2", ` + nsecNIP19, `{"password":"[redacted]", [redacted]`},
		{"invalid_trailing", `{"a":1}x ` + nsecNIP19, `{"a":1}x [redacted]`},
		{"not_json", "plain " + mnemonic12, "plain [redacted]"},
		{"empty", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(JSON([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("JSON(%s)\n = %s\nwant %s", tt.in, got, tt.want)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
				t.Errorf("JSON(%s) = %s is not valid JSON", tt.in, got)
			}
		})
	}
}

// TestJSONKeepsInput: nothing to redact returns the input itself, and
// redacting never changes the input.
func TestJSONKeepsInput(t *testing.T) {
	in := []byte(`{"key":"Enter"}`)
	if out := JSON(in); &out[0] != &in[0] {
		t.Error("JSON copied an input with nothing to redact")
	}
	in = []byte(`{"password":"hunter2"}`)
	JSON(in)
	if string(in) != `{"password":"hunter2"}` {
		t.Errorf("JSON changed its input to %s", in)
	}
	s := "nothing here"
	if got := Text(s); !sameString(got, s) {
		t.Error("Text copied a text with nothing to redact")
	}
}

func TestJSONDeep(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if json.Valid([]byte(deep)) {
		t.Skip("encoding/json accepts this depth")
	}
	if got := string(JSON([]byte(deep))); got != deep {
		t.Error("a too deep document changed")
	}
	ok := strings.Repeat(`{"a":[`, 100) + `{"password":"x"}` + strings.Repeat(`]}`, 100)
	if got := string(JSON([]byte(ok))); !strings.Contains(got, `"password":"[redacted]"`) {
		t.Errorf("nested 200 deep: %s", got)
	}
}

func TestSet(t *testing.T) {
	var s Set
	if s.Add("12345") {
		t.Error("Add took a value shorter than MinKnownLen")
	}
	if !s.Add("hunter22") || !s.Add("correct horse") || !s.Add("123456") {
		t.Fatal("Add refused a value")
	}
	s.Add("hunter22")
	if s.Len() != 3 {
		t.Errorf("Len = %d, want 3", s.Len())
	}
	tests := []struct {
		name, in, want string
	}{
		{"value", `{"ref":"e5","value":"hunter22"}`, `{"ref":"e5","value":"[redacted]"}`},
		{"substring", `{"script":"el.value='xhunter22y'"}`, `{"script":"el.value='x[redacted]y'"}`},
		{"escaped", `{"script":"a\ncorrect horse\nb"}`, `{"script":"a\n[redacted]\nb"}`},
		{"number", `{"code":123456,"n":1234567}`, `{"code":"[redacted]","n":"[redacted]"}`},
		{"with_patterns", `{"v":"hunter22 ` + nsecNIP19 + `"}`, `{"v":"[redacted] [redacted]"}`},
		{"text_invalid_json", `oops hunter22`, `oops [redacted]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(s.JSON([]byte(tt.in))); got != tt.want {
				t.Errorf("Set.JSON(%s)\n = %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
	if got := s.Text("typed hunter22 and hunter22hunter22"); got != "typed [redacted] and [redacted]" {
		t.Errorf("Set.Text = %q", got)
	}
	// The package-level functions know no values.
	if got := Text("hunter22"); got != "hunter22" {
		t.Errorf("Text redacted a value known only to a Set: %q", got)
	}
	s.Remove("hunter22")
	s.Remove("never added")
	if got := s.Text("hunter22"); got != "hunter22" {
		t.Errorf("a removed value is still redacted: %q", got)
	}
	var nilSet *Set
	if got := nilSet.Text("hunter22 " + nsecNIP19); got != "hunter22 [redacted]" {
		t.Errorf("nil Set: %q", got)
	}
}

func TestSetConcurrent(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := fmt.Sprintf("s%d-%03d", g, i)
				s.Add(v)
				if i%2 == 0 {
					s.Remove(v)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s.JSON([]byte(`{"v":"s1-001 and s2-003"}`))
				s.Text("s0-005")
			}
		}()
	}
	wg.Wait()
	if got := s.Text("s3-199 s3-198"); got != "[redacted] s3-198" {
		t.Errorf("after concurrent use: %q", got)
	}
}

// nsecPattern finds nsec private keys, as an independent check.
var nsecPattern = regexp.MustCompile(`(?i)nsec1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58,}`)

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"key":"Enter"}`,
		`{"password":"hunter2","nested":{"token":[1,2,{"a":"b"}]}}`,
		`{"value":"` + nsecNIP19 + `"}`,
		`{"value":"x\n` + nsecNIP19 + `\u0041"}`,
		`{"url":"` + bunkerURL + `"}`,
		`{"v":"` + mnemonic24 + `"}`,
		`["` + ncryptsecNIP49 + `", 1.5e10, true, null]`,
		`{"a":"\ud83d\ude00\ud800"}`,
		`{"password" : "x" , "b" :`,
		nsecNIP19,
		`{"s":"password=\"` + nsecNIP19 + `\""}`,
	} {
		f.Add([]byte(s))
	}
	var known Set
	known.Add("hunter2")
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := string(in)
		valid := json.Valid(in)
		if _, _, ok := redactJSON(orig, nil); ok != valid {
			t.Fatalf("redactJSON says valid=%v, encoding/json says %v for %q", ok, valid, in)
		}
		for _, out := range [][]byte{JSON(in), known.JSON(in)} {
			if string(in) != orig {
				t.Fatal("JSON changed its input")
			}
			if valid && !json.Valid(out) {
				t.Fatalf("JSON(%q) = %q is not valid JSON", in, out)
			}
			for _, key := range nsecPattern.FindAllString(orig, -1) {
				if strings.Contains(string(out), key) {
					t.Fatalf("JSON(%q) = %q keeps %s", in, out, key)
				}
			}
			if valid {
				// No nsec is left in any decoded string either.
				var v any
				dec := json.NewDecoder(bytes.NewReader(out))
				dec.UseNumber()
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				walkStrings(v, func(s string) {
					if key := nsecPattern.FindString(s); key != "" {
						t.Fatalf("JSON(%q) = %q keeps %s", in, out, key)
					}
				})
			}
		}
		if out := Text(orig); nsecPattern.MatchString(out) {
			t.Fatalf("Text(%q) = %q keeps an nsec", orig, out)
		}
	})
}

// walkStrings calls fn with each string (key or value) in a decoded JSON
// value.
func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case []any:
		for _, e := range v {
			walkStrings(e, fn)
		}
	case map[string]any:
		for k, e := range v {
			fn(k)
			walkStrings(e, fn)
		}
	}
}
