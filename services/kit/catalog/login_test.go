package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
)

const (
	testNsec  = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	testHex   = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	testNpub  = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	testWords = "leader monkey parrot ring guide accident before fence cannon height naive bean"
)

func TestParseLogin(t *testing.T) {
	tests := []struct {
		tool, args string
		want       *signerv1.Login
		wantErr    string
	}{
		{tool: "login", args: `{"method":"local","nsec":"` + testNsec + `"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: testNsec}},
		{tool: "login", args: `{"method":"local","privkey_hex":"` + testHex + `","remember":true}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: testHex, Remember: true}},
		{tool: "login", args: `{"method":"local","npub":"` + testNpub + `"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, Pubkey: testNpub}},
		{tool: "login", args: `{"method":"local"}`, wantErr: "method local needs a private key: give nsec"},
		{tool: "login", args: `{"method":"local","nsec":"` + testNsec + `","privkey_hex":"` + testHex + `"}`,
			wantErr: "give either nsec or privkey_hex, not both"},
		{tool: "login", args: `{"method":"local","nsec":"` + testNsec + `","npub":"` + testNpub + `"}`,
			wantErr: "method local takes a key (nsec or privkey_hex) or, to load a remembered identity, only its npub"},
		{tool: "login", args: `{"method":"local","npub":"` + testNpub + `","remember":true}`, wantErr: `argument "remember" needs a key`},
		{tool: "login", args: `{"method":"local","nsec":"` + testNsec + `","mnemonic":"x"}`, wantErr: `argument "mnemonic" is for method seed, not local`},
		{tool: "login", args: `{"method":"seed","mnemonic":"` + testWords + `"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: testWords}},
		{tool: "login", args: `{"method":"seed","mnemonic":"` + testWords + `","passphrase":"p","account":3,"remember":true}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: testWords, Passphrase: "p", Account: 3, Remember: true}},
		{tool: "login", args: `{"method":"seed"}`, wantErr: `argument "mnemonic" is required for method seed`},
		{tool: "login", args: `{"method":"seed","mnemonic":"a","account":-1}`, wantErr: `argument "account" must be at least 0`},
		{tool: "login", args: `{"method":"seed","mnemonic":"a","nsec":"` + testNsec + `"}`, wantErr: `argument "nsec" is for method local, not seed`},
		{tool: "login", args: `{"method":"readonly","npub":"` + testNpub + `"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_READONLY, Pubkey: testNpub}},
		{tool: "login", args: `{"method":"readonly","pubkey_hex":"` + testHex + `"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_READONLY, Pubkey: testHex}},
		{tool: "login", args: `{"method":"readonly"}`, wantErr: "method readonly needs a public key"},
		{tool: "login", args: `{"method":"readonly","npub":"` + testNpub + `","pubkey_hex":"` + testHex + `"}`, wantErr: "give either npub or pubkey_hex"},
		{tool: "login", args: `{"method":"readonly","npub":"` + testNpub + `","remember":true}`, wantErr: `argument "remember" only works with methods local and seed`},
		{tool: "login", args: `{"method":"nip46","bunker_url":"bunker://abc?relay=wss://r.example&secret=s3"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_NIP46, BunkerUrl: "bunker://abc?relay=wss://r.example&secret=s3"}},
		{tool: "login", args: `{"method":"nip46"}`, wantErr: `argument "bunker_url" is required for method nip46`},
		{tool: "login", args: `{"method":"nip46","bunker_url":"https://x"}`, wantErr: `argument "bunker_url" must start with bunker://`},
		{tool: "login", args: `{"method":"nsigner","transport":"unix","device":"/run/ns.sock"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: "/run/ns.sock"}}},
		{tool: "login", args: `{"method":"nsigner","transport":"qrexec","device":"vault","index":2}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER,
				Nsigner: &signerv1.NsignerTarget{Transport: "qrexec", Device: "vault", Service: "qubes.NsignerRpc", Index: 2}}},
		{tool: "login", args: `{"method":"nsigner","device":"x"}`, wantErr: `argument "transport" is required for method nsigner`},
		{tool: "login", args: `{"method":"nsigner","transport":"tcp"}`, wantErr: `argument "device" is required for method nsigner (host:port)`},
		{tool: "login", args: `{"method":"nsigner","transport":"usb","device":"x"}`, wantErr: `argument "transport" must be one of serial, unix, tcp, qrexec`},
		{tool: "login", args: `{}`, wantErr: `argument "method" is required`},
		{tool: "login", args: `{"method":"password"}`, wantErr: `argument "method" must be one of local, seed, readonly, nip46, nsigner`},
		{tool: "switch_identity", args: `{"method":"local","nsec":"` + testNsec + `","session":"sov_x"}`,
			want: &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: testNsec}},
		{tool: "logout", args: `{}`},
		{tool: "login_status", args: `{"session":"sov_x"}`},
		{tool: "login_status", args: `{"method":"local"}`, wantErr: `unknown argument "method"; this tool takes session`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+"/"+tt.args, func(t *testing.T) {
			tool, ok := Lookup(tt.tool)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.tool)
			}
			var raw any
			if err := json.Unmarshal([]byte(tt.args), &raw); err != nil {
				t.Fatal(err)
			}
			call, err := tool.Parse(raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%s) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				for _, secret := range []string{testNsec, testHex, testWords} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("Parse(%s) error holds a secret: %v", tt.args, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", tt.args, err)
			}
			if call.Request != nil {
				t.Errorf("Parse(%s) built a worker request: %v", tt.args, call.Request)
			}
			if !proto.Equal(call.Login, tt.want) {
				t.Errorf("Parse(%s).Login = %s, want %s", tt.args, prototext.Format(call.Login), prototext.Format(tt.want))
			}
		})
	}
}

func TestHideSecrets(t *testing.T) {
	args := map[string]any{
		"method": "seed", "mnemonic": testWords, "passphrase": "pw", "nsec": testNsec, "privkey_hex": testHex,
		"account": 2.0, "npub": testNpub, "session": "sov_x",
		"bunker_url": "bunker://abc?relay=wss%3A%2F%2Fr.example&secret=s3cr3t&relay=wss://b.example",
	}
	got := HideSecrets(args, "[hidden]")
	b, _ := json.Marshal(got)
	for _, secret := range []string{testWords, "\"pw\"", testNsec, testHex, "s3cr3t"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("HideSecrets kept %q: %s", secret, b)
		}
	}
	for _, kept := range []string{`"method":"seed"`, `"account":2`, testNpub, `"session":"sov_x"`} {
		if !strings.Contains(string(b), kept) {
			t.Errorf("HideSecrets lost %q: %s", kept, b)
		}
	}
	if u, want := got["bunker_url"], "bunker://abc?relay=wss%3A%2F%2Fr.example&secret=[hidden]&relay=wss://b.example"; u != want {
		t.Errorf("HideSecrets(bunker_url) = %q, want %q", u, want)
	}
	if args["mnemonic"] != testWords {
		t.Errorf("HideSecrets changed its argument")
	}
	for in, want := range map[string]string{
		"bunker://abc?relay=wss://r":         "bunker://abc?relay=wss://r",
		"bunker://abc?Secret=x":              "bunker://abc?Secret=[hidden]",
		"bunker://user:pw@abc?relay=wss://r": "[hidden]",
		"bunker://abc/s3cr3t":                "[hidden]",
		"%zz":                                "[hidden]",
	} {
		if got := HideSecrets(map[string]any{"bunker_url": in}, "[hidden]")["bunker_url"]; got != want {
			t.Errorf("HideSecrets(bunker_url %q) = %q, want %q", in, got, want)
		}
	}
	if got := HideSecrets(map[string]any{"bunker_url": 7.0}, "[hidden]")["bunker_url"]; got != "[hidden]" {
		t.Errorf("HideSecrets(bunker_url 7) = %v", got)
	}
	plain := map[string]any{"url": "https://example.com"}
	if got := HideSecrets(plain, "[hidden]"); got["url"] != "https://example.com" {
		t.Errorf("HideSecrets(%v) = %v", plain, got)
	}
}
