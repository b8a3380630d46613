package nostr

import (
	"errors"
	"strings"
	"testing"
)

// The two NIP-06 test vectors.
func TestNIP06Vectors(t *testing.T) {
	tests := []struct{ mnemonic, sec, nsec, pub, npub string }{
		{
			"leader monkey parrot ring guide accident before fence cannon height naive bean",
			"7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a",
			"nsec10allq0gjx7fddtzef0ax00mdps9t2kmtrldkyjfs8l5xruwvh2dq0lhhkp",
			"17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917",
			"npub1zutzeysacnf9rru6zqwmxd54mud0k44tst6l70ja5mhv8jjumytsd2x7nu",
		},
		{
			"what bleak badge arrange retreat wolf trade produce cricket blur garlic valid proud rude strong choose busy staff weather area salt hollow arm fade",
			"c15d739894c81a2fcfd3a2df85a0d2c0dbc47a280d092799f144d73d7ae78add",
			"nsec1c9wh8xy5eqdzln7n5t0ctgxjcrdug73gp5yj0x03gntn67h83twssdfhel",
			"d41b22899549e1f3d335a31002cfd382174006e166d3e658e3a5eecdb6463573",
			"npub16sdj9zv4f8sl85e45vgq9n7nsgt5qphpvmf7vk8r5hhvmdjxx4es8rq74h",
		},
	}
	for _, tt := range tests {
		if err := ValidateMnemonic(tt.mnemonic); err != nil {
			t.Errorf("ValidateMnemonic: %v", err)
		}
		k, err := KeyFromMnemonic(tt.mnemonic, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !k.Equal(mustKey(t, tt.sec)) {
			t.Errorf("%s…: wrong private key", tt.mnemonic[:12])
		}
		if got := EncodeNsec(k); got != tt.nsec {
			t.Errorf("nsec = %s, want %s", got, tt.nsec)
		}
		if got := k.PublicKey(); got != tt.pub {
			t.Errorf("public key = %s, want %s", got, tt.pub)
		}
		if got, _ := EncodeNpub(k.PublicKey()); got != tt.npub {
			t.Errorf("npub = %s, want %s", got, tt.npub)
		}
		// Extra white space and upper case change nothing.
		messy := "  " + strings.ToUpper(strings.ReplaceAll(tt.mnemonic, " ", " \t\n ")) + " "
		k2, err := KeyFromMnemonic(messy, "", 0)
		if err != nil || !k2.Equal(k) {
			t.Errorf("messy spacing/case: %v", err)
		}
	}
}

// BIP-32 test vector 1 (seed 000102…0f): the private keys of m, m/0',
// m/0'/1, m/0'/1/2', m/0'/1/2'/2 and m/0'/1/2'/2/1000000000, covering
// hardened and normal derivation.
func TestBIP32Vector(t *testing.T) {
	seed := mustHex(t, "000102030405060708090a0b0c0d0e0f")
	tests := []struct {
		path []uint32
		priv string
	}{
		{nil, "e8f32e723decf4051aefac8e2c93c9c5b214313817cdb01a1494b917c8436b35"},
		{[]uint32{hardened}, "edb2e14f9ee77d26dd93b4ecede8d16ed408ce149b6cd80b0715a2d911a0afea"},
		{[]uint32{hardened, 1}, "3c6cb8d0f6a264c91ea8b5030fadaa8e538b020f0a387421a12de9319dc93368"},
		{[]uint32{hardened, 1, 2 + hardened}, "cbce0d719ecf7431d88e6a89fa1483e02e35092af60c042b1df2ff59fa424dca"},
		{[]uint32{hardened, 1, 2 + hardened, 2}, "0f479245fb19a38a1954c5c7c0ebab2f9bdfd96a17563ef28a6a4b1a2a764ef4"},
		{[]uint32{hardened, 1, 2 + hardened, 2, 1000000000}, "471b76e389e528d6de6d816857e012c5455051cad6660850e58372a6c3e6e7c8"},
	}
	for _, tt := range tests {
		k, err := deriveBIP32(seed, tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if !k.Equal(mustKey(t, tt.priv)) {
			t.Errorf("path %v: wrong key", tt.path)
		}
	}
}

func TestKeyFromMnemonicAccounts(t *testing.T) {
	const m = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	seen := map[string]bool{}
	for _, c := range []struct {
		pass    string
		account uint32
	}{{"", 0}, {"", 1}, {"", 2}, {"TREZOR", 0}, {"", 1<<31 - 1}} {
		k, err := KeyFromMnemonic(m, c.pass, c.account)
		if err != nil {
			t.Fatal(err)
		}
		if seen[k.PublicKey()] {
			t.Errorf("passphrase %q account %d repeats a key", c.pass, c.account)
		}
		seen[k.PublicKey()] = true
		// The key is the BIP-32 derivation of the seed along the NIP-06 path.
		seed, _ := MnemonicSeed(m, c.pass)
		want, _ := deriveBIP32(seed, []uint32{44 + hardened, 1237 + hardened, c.account + hardened, 0, 0})
		if !k.Equal(want) {
			t.Errorf("account %d: not m/44'/1237'/%d'/0/0", c.account, c.account)
		}
	}
	if _, err := KeyFromMnemonic(m, "", 1<<31); err == nil || !strings.Contains(err.Error(), "2^31") {
		t.Errorf("account 2^31: %v", err)
	}
}

// BIP-39's own vector (trezor/python-mnemonic vectors.json, first entry):
// the seed of "abandon … about" with passphrase "TREZOR".
func TestMnemonicSeedVector(t *testing.T) {
	m := strings.Repeat("abandon ", 11) + "about"
	seed, err := MnemonicSeed(m, "TREZOR")
	if err != nil {
		t.Fatal(err)
	}
	const want = "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e53495531f09a6987599d18264c1e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04"
	if got := hexString(seed); got != want {
		t.Errorf("seed = %s, want %s", got, want)
	}
}

func TestValidateMnemonicErrors(t *testing.T) {
	const good = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	words := strings.Fields(good)
	replace := func(i int, w string) string {
		c := append([]string(nil), words...)
		c[i] = w
		return strings.Join(c, " ")
	}
	tests := []struct {
		name, m, errPart string
		position         int
	}{
		{"11 words", strings.Join(words[:11], " "), "11 words", 0},
		{"13 words", good + " bean", "13 words", 0},
		{"empty", "", "0 words", 0},
		{"unknown word 5", replace(4, "guidee"), "word 5 of 12", 5},
		{"unknown word 1", replace(0, "satoshy"), "word 1 of 12", 1},
		{"checksum", replace(11, "abandon"), "checksum", 0},
		{"swapped words", strings.Join(append([]string{words[1], words[0]}, words[2:]...), " "), "checksum", 0},
	}
	for _, tt := range tests {
		err := ValidateMnemonic(tt.m)
		if err == nil {
			t.Errorf("%s: ValidateMnemonic succeeded", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: error %q does not say %q", tt.name, err, tt.errPart)
		}
		var we *MnemonicWordError
		if tt.position > 0 {
			if !errors.As(err, &we) || we.Position != tt.position || we.Word == "" {
				t.Errorf("%s: want a MnemonicWordError at %d, got %#v", tt.name, tt.position, err)
			} else if strings.Contains(err.Error(), we.Word) {
				t.Errorf("%s: error message %q contains the word", tt.name, err)
			}
		}
		if _, err := KeyFromMnemonic(tt.m, "", 0); err == nil {
			t.Errorf("%s: KeyFromMnemonic succeeded", tt.name)
		}
	}
	// All valid lengths.
	for _, n := range []int{12, 15, 18, 21, 24} {
		m := validMnemonic(n)
		if err := ValidateMnemonic(m); err != nil {
			t.Errorf("%d words: %v", n, err)
		}
	}
}

// validMnemonic builds an n-word mnemonic of all-zero entropy with its
// checksum, from the word list.
func validMnemonic(n int) string {
	list, _ := bip39()
	entropy := make([]byte, n*11*32/33/8)
	sum := sha256Sum(entropy)
	cs := n * 11 / 33
	last := int(sum[0]) >> (8 - cs) // the last word carries 11-cs zero bits then cs checksum bits
	return strings.Repeat(list[0]+" ", n-1) + list[last]
}
