package catalog

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
)

// The identity tools (login, switch_identity, logout, login_status) give
// the call's browser session a Nostr identity, held by the signer service.
// Their arguments carry secrets: SecretArguments and HideSecrets keep them
// out of every record of the call.

// Login methods, as the tools name them.
const (
	MethodLocal    = "local"
	MethodSeed     = "seed"
	MethodReadonly = "readonly"
	MethodNIP46    = "nip46"
	MethodNsigner  = "nsigner"
)

// Methods lists the login methods in their documented order.
var Methods = []string{MethodLocal, MethodSeed, MethodReadonly, MethodNIP46, MethodNsigner}

// DefaultNsignerService is the qrexec service an nsigner login uses when
// none is given.
const DefaultNsignerService = "qubes.NsignerRpc"

// SecretArguments are the arguments whose values are secrets (keys,
// mnemonics, passphrases): no record of a call may carry them. bunker_url
// is a secret only in part (its secret= parameter): see HideSecrets.
var SecretArguments = []string{"nsec", "privkey_hex", "mnemonic", "passphrase"}

// bunkerURLParam is the argument whose secret= query parameter is a secret.
const bunkerURLParam = "bunker_url"

// HideSecrets returns args with the value of every SecretArguments member
// replaced by hidden and the secret of a bunker URL too (the rest of the
// URL, the signer's pubkey and relays, stays readable). args itself is not
// changed. It applies to the arguments of any tool: a secret given to the
// wrong tool is still a secret.
func HideSecrets(args map[string]any, hidden string) map[string]any {
	var out map[string]any
	set := func(k string, v any) {
		if out == nil {
			out = make(map[string]any, len(args))
			for k, v := range args {
				out[k] = v
			}
		}
		out[k] = v
	}
	for _, k := range SecretArguments {
		if _, ok := args[k]; ok {
			set(k, hidden)
		}
	}
	switch v := args[bunkerURLParam].(type) {
	case nil: // absent
	case string:
		if h := hideBunkerSecret(v, hidden); h != v {
			set(bunkerURLParam, h)
		}
	default:
		set(bunkerURLParam, hidden)
	}
	if v, ok := args[FilesParam]; ok {
		set(FilesParam, summarizeFiles(v)) // files.go: contents never reach the trail
	}
	if v, ok := args[HeadersParam]; ok {
		set(HeadersParam, hideHeaderValues(v, hidden)) // emulate's extra headers: often credentials
	}
	if out == nil {
		return args
	}
	return out
}

// hideBunkerSecret keeps the remote signer's pubkey and relays of a
// bunker:// URL and replaces the value of every other query parameter (the
// secret) with hidden; a URL it cannot parse is hidden as a whole.
func hideBunkerSecret(s, hidden string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.User != nil || u.Fragment != "" || u.Path != "" && u.Path != "/" {
		return hidden
	}
	if u.RawQuery == "" {
		return s
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if key, err := url.QueryUnescape(k); err != nil || key != "relay" {
			parts[i] = k + "=" + hidden
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	return u.String()
}

// loginParams are the arguments of login and switch_identity.
var loginParams = []Param{
	{Name: "method", Type: String, Required: true, Enum: Methods,
		Description: "How to log in: local (nsec or hex private key), seed (BIP-39 mnemonic), readonly (npub), " +
			"nip46 (bunker:// URL of a remote signer), nsigner (hardware signer)"},
	{Name: "nsec", Type: String, Description: "nsec1... string (method: local)"},
	{Name: "privkey_hex", Type: String, Description: "64-char hex private key (method: local)"},
	{Name: "mnemonic", Type: String, Description: "12 or 24 BIP-39 words (method: seed)"},
	{Name: "passphrase", Type: String, Description: "Optional BIP-39 passphrase of the mnemonic (method: seed)"},
	{Name: "account", Type: Integer, Default: 0, Min: bound(0), Max: bound(1<<31 - 1),
		Description: "Account index (method: seed); the key is at m/44'/1237'/account'/0/0 (NIP-06)"},
	{Name: "npub", Type: String, Description: "npub1... string (method: readonly; with method local and no key, " +
		"the remembered identity to load)"},
	{Name: "pubkey_hex", Type: String, Description: "64-char hex pubkey (method: readonly; with method local and no key, " +
		"the remembered identity to load)"},
	{Name: "bunker_url", Type: String, Description: "bunker:// URL (method: nip46), " +
		"e.g. bunker://REMOTE_SIGNER_PUBKEY?relay=wss://relay.example&secret=..."},
	{Name: "transport", Type: String, Enum: []string{"serial", "unix", "tcp", "qrexec"}, Description: "Transport type (method: nsigner)"},
	{Name: "device", Type: String, Description: "Device path, socket name, host:port, or qube name (method: nsigner)"},
	{Name: "service", Type: String, Default: DefaultNsignerService, Description: "Qrexec service name (method: nsigner, transport: qrexec)"},
	{Name: "index", Type: Integer, Default: 0, Min: bound(0), Max: bound(1<<31 - 1), Description: "Key index (method: nsigner)"},
	{Name: "remember", Type: Boolean, Default: false,
		Description: "Also keep the key encrypted (NIP-49) in the signer's data dir, so that a later login with method local " +
			"and only its npub loads it again (methods: local, seed; the signer needs its passphrase, SOVEREIGN_SIGNER_PASSPHRASE)"},
}

// methodArgs says which methods take each method-specific argument that
// has no default (those with one are ignored by the other methods).
var methodArgs = map[string][]string{
	"nsec":        {MethodLocal},
	"privkey_hex": {MethodLocal},
	"mnemonic":    {MethodSeed},
	"passphrase":  {MethodSeed},
	"npub":        {MethodReadonly, MethodLocal},
	"pubkey_hex":  {MethodReadonly, MethodLocal},
	"bunker_url":  {MethodNIP46},
	"transport":   {MethodNsigner},
	"device":      {MethodNsigner},
}

// buildLogin checks a login's arguments for its method and builds the
// signer request (its Scope is the caller's to fill). Errors name the
// arguments, never their values.
func buildLogin(a Args) (*signerv1.Login, error) {
	method := a.str("method")
	for _, p := range loginParams { // the order of the schema, for stable errors
		owners, specific := methodArgs[p.Name]
		if !specific || strings.TrimSpace(a.str(p.Name)) == "" || slices.Contains(owners, method) {
			continue
		}
		return nil, argErr(p.Name, "is for method %s, not %s", strings.Join(owners, " or "), method)
	}
	if a.boolean("remember") && method != MethodLocal && method != MethodSeed {
		return nil, argErr("remember", "only works with methods local and seed (a key the signer holds), not %s", method)
	}
	given := func(name string) bool { return strings.TrimSpace(a.str(name)) != "" }
	// pubkey is npub or pubkey_hex: exactly one, or neither.
	pubkey := func() (string, error) {
		if given("npub") && given("pubkey_hex") {
			return "", &ArgError{Msg: "give either npub or pubkey_hex, not both"}
		}
		return strings.TrimSpace(a.str("npub") + a.str("pubkey_hex")), nil
	}
	switch method {
	case MethodLocal:
		key := given("nsec") || given("privkey_hex")
		pk, err := pubkey()
		if err != nil {
			return nil, err
		}
		switch {
		case given("nsec") && given("privkey_hex"):
			return nil, &ArgError{Msg: "method local takes one key: give either nsec or privkey_hex, not both"}
		case key && pk != "":
			return nil, &ArgError{Msg: "method local takes a key (nsec or privkey_hex) or, to load a remembered identity, " +
				"only its npub or pubkey_hex, not both"}
		case !key && pk == "":
			return nil, &ArgError{Msg: "method local needs a private key: give nsec (nsec1...) or privkey_hex (64 hex characters); " +
				"or only npub or pubkey_hex to load an identity remembered earlier (login_status lists them)"}
		case pk != "" && a.boolean("remember"):
			return nil, argErr("remember", "needs a key (nsec or privkey_hex); an identity loaded by its npub is remembered already")
		}
		// The signer parses either form of the key.
		return &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: strings.TrimSpace(a.str("nsec") + a.str("privkey_hex")),
			Pubkey: pk, Remember: a.boolean("remember")}, nil
	case MethodSeed:
		if !given("mnemonic") {
			return nil, argErr("mnemonic", "is required for method seed (12 or 24 BIP-39 words)")
		}
		n, _ := a.integer("account")
		return &signerv1.Login{Method: signerv1.Method_METHOD_SEED, Mnemonic: a.str("mnemonic"), Passphrase: a.str("passphrase"),
			Account: uint32(n), Remember: a.boolean("remember")}, nil
	case MethodReadonly:
		pk, err := pubkey()
		if err != nil {
			return nil, err
		}
		if pk == "" {
			return nil, &ArgError{Msg: "method readonly needs a public key: give npub (npub1...) or pubkey_hex (64 hex characters)"}
		}
		return &signerv1.Login{Method: signerv1.Method_METHOD_READONLY, Pubkey: pk}, nil
	case MethodNIP46:
		u := strings.TrimSpace(a.str("bunker_url"))
		if u == "" {
			return nil, argErr("bunker_url", "is required for method nip46 (bunker://REMOTE_SIGNER_PUBKEY?relay=wss://...&secret=...)")
		}
		if !strings.HasPrefix(strings.ToLower(u), "bunker://") {
			return nil, argErr("bunker_url", "must start with bunker:// (the URL your remote signer shows for a new connection)")
		}
		return &signerv1.Login{Method: signerv1.Method_METHOD_NIP46, BunkerUrl: u}, nil
	case MethodNsigner:
		transport := a.str("transport")
		if transport == "" {
			return nil, argErr("transport", "is required for method nsigner: serial, unix, tcp or qrexec")
		}
		device := strings.TrimSpace(a.str("device"))
		if device == "" {
			return nil, argErr("device", "is required for method nsigner (%s)", deviceHint(transport))
		}
		target := &signerv1.NsignerTarget{Transport: transport, Device: device}
		if transport == "qrexec" {
			target.Service = strings.TrimSpace(a.str("service"))
		}
		n, _ := a.integer("index")
		target.Index = uint32(n)
		return &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER, Nsigner: target}, nil
	}
	return nil, argErr("method", "must be one of %s", strings.Join(Methods, ", "))
}

// deviceHint says what the device argument of an nsigner transport is.
func deviceHint(transport string) string {
	switch transport {
	case "serial":
		return "the serial device path, e.g. /dev/ttyACM0"
	case "unix":
		return "the unix socket path"
	case "tcp":
		return "host:port"
	}
	return "the name of the qube that holds the signer"
}

// MethodName is the tools' name of a signer method ("" for none).
func MethodName(m signerv1.Method) string {
	switch m {
	case signerv1.Method_METHOD_LOCAL:
		return MethodLocal
	case signerv1.Method_METHOD_SEED:
		return MethodSeed
	case signerv1.Method_METHOD_READONLY:
		return MethodReadonly
	case signerv1.Method_METHOD_NIP46:
		return MethodNIP46
	case signerv1.Method_METHOD_NSIGNER:
		return MethodNsigner
	}
	return ""
}

// LoginHint is what a session without identity is told to do.
var LoginHint = fmt.Sprintf("call login (methods: %s)", strings.Join(Methods, ", "))

var identityTools = []Tool{
	{
		Name: "login_status", Title: "Login status", ReadOnly: true, Identity: true,
		Description: "Check if the browser is logged in. Returns the current login state, method, and pubkey if logged in, " +
			"the link state of an nsigner or nip46 signer, the identities the signer remembers and its origin policy " +
			"(which pages may sign what through window.nostr).",
	},
	{
		Name: "login", Title: "Log in", Identity: true, login: buildLogin,
		Description: "Log in to the browser with a Nostr identity. Methods: 'local' (nsec or hex privkey), 'seed' (BIP-39 " +
			"mnemonic), 'readonly' (npub), 'nip46' (bunker:// URL), 'nsigner' (hardware signer). The identity belongs to this " +
			"browser session: its pages get window.nostr (NIP-07), signing through the signer service under its origin policy; " +
			"the key never leaves the signer. A failed login leaves the session as it was. When the gateway requires a login, " +
			"browser tools refuse until this is called. nip46 and nsigner may wait for a person to approve on the bunker or device.",
		params: loginParams,
	},
	{
		Name: "logout", Title: "Log out", Identity: true,
		Description: "Log out and clear the current Nostr identity. Its keys are wiped from the signer and new pages of this " +
			"browser session get no window.nostr; logging out when not logged in succeeds.",
	},
	{
		Name: "switch_identity", Title: "Switch identity", Identity: true, login: buildLogin,
		Description: "Switch to a new Nostr identity. Same parameters as login. Frees the old signer first: the old identity " +
			"is logged out, then the new one logged in; if that login fails, the session stays logged out.",
		params: loginParams,
	},
}
