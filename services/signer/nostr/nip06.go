package nostr

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// NIP-06: keys from a BIP-39 mnemonic, derived with BIP-32 along
// m/44'/1237'/<account>'/0/0.

var bip39 = sync.OnceValues(func() ([]string, map[string]int) {
	list := redact.BIP39English()
	idx := make(map[string]int, len(list))
	for i, w := range list {
		idx[w] = i
	}
	return list, idx
})

// MnemonicWordError says that a word of a mnemonic is not in the BIP-39
// English list. Its message gives the position but not the word (the
// mnemonic is a secret and errors get logged); Word is there for a user
// interface that shows it to its owner.
type MnemonicWordError struct {
	Position int    // 1-based
	Count    int    // words in the mnemonic
	Word     string // the word as given; never put it in logs
}

func (e *MnemonicWordError) Error() string {
	return fmt.Sprintf("nostr: mnemonic word %d of %d is not in the BIP-39 English word list (check its spelling)", e.Position, e.Count)
}

// mnemonicWords splits a mnemonic on white space and lower-cases it.
func mnemonicWords(m string) []string {
	words := strings.Fields(m)
	for i, w := range words {
		words[i] = strings.ToLower(w)
	}
	return words
}

// ValidateMnemonic checks a BIP-39 English mnemonic: 12, 15, 18, 21 or 24
// words (separated by any white space, in any case), each in the word
// list (a *MnemonicWordError names the first that is not, by position),
// and a matching checksum.
func ValidateMnemonic(m string) error {
	_, err := mnemonicEntropy(mnemonicWords(m))
	return err
}

// mnemonicEntropy checks the words and returns the entropy they encode.
func mnemonicEntropy(words []string) ([]byte, error) {
	switch len(words) {
	case 12, 15, 18, 21, 24:
	default:
		return nil, fmt.Errorf("nostr: mnemonic has %d words; want 12, 15, 18, 21 or 24", len(words))
	}
	_, idx := bip39()
	// 11 bits a word: entropy (32 bits per 3 words) then checksum.
	bits := make([]byte, 0, len(words)*11)
	for i, w := range words {
		n, ok := idx[w]
		if !ok {
			return nil, &MnemonicWordError{Position: i + 1, Count: len(words), Word: w}
		}
		for j := 10; j >= 0; j-- {
			bits = append(bits, byte(n>>j)&1)
		}
	}
	csBits := len(words) * 11 / 33
	entropy := make([]byte, (len(bits)-csBits)/8)
	for i := range entropy {
		for j := range 8 {
			entropy[i] = entropy[i]<<1 | bits[i*8+j]
		}
	}
	sum := sha256.Sum256(entropy)
	for j := range csBits {
		if bits[len(entropy)*8+j] != (sum[0]>>(7-j))&1 {
			clear(entropy)
			clear(bits)
			return nil, errors.New("nostr: mnemonic checksum does not match: a word is wrong or out of order")
		}
	}
	clear(bits)
	return entropy, nil
}

// MnemonicSeed returns the 64-byte BIP-39 seed of a valid mnemonic and an
// optional passphrase (both NFKD-normalised; words joined by single
// spaces, lower case). The caller should clear it.
func MnemonicSeed(m, passphrase string) ([]byte, error) {
	words := mnemonicWords(m)
	entropy, err := mnemonicEntropy(words)
	if err != nil {
		return nil, err
	}
	clear(entropy)
	phrase := norm.NFKD.String(strings.Join(words, " "))
	salt := []byte("mnemonic" + norm.NFKD.String(passphrase))
	defer clear(salt)
	seed, err := pbkdf2.Key(sha512.New, phrase, salt, 2048, 64)
	if err != nil {
		return nil, fmt.Errorf("nostr: mnemonic seed: %w", err)
	}
	return seed, nil
}

// KeyFromMnemonic derives the NIP-06 key of an account from a BIP-39
// English mnemonic and an optional passphrase: BIP-32 path
// m/44'/1237'/<account>'/0/0. account must be below 2^31.
func KeyFromMnemonic(m, passphrase string, account uint32) (*SecretKey, error) {
	if account >= hardened {
		return nil, fmt.Errorf("nostr: account %d is too large: a hardened BIP-32 index must be below 2^31", account)
	}
	seed, err := MnemonicSeed(m, passphrase)
	if err != nil {
		return nil, err
	}
	defer clear(seed)
	return deriveBIP32(seed, []uint32{44 + hardened, 1237 + hardened, account + hardened, 0, 0})
}

const hardened = 1 << 31

// deriveBIP32 derives the private key at path from a BIP-32 seed.
func deriveBIP32(seed []byte, path []uint32) (*SecretKey, error) {
	mac := hmac.New(sha512.New, []byte("Bitcoin seed"))
	mac.Write(seed)
	I := mac.Sum(nil)
	defer clear(I)
	var key, chain [32]byte
	defer clear(key[:])
	defer clear(chain[:])
	copy(key[:], I[:32])
	copy(chain[:], I[32:])
	var k btcec.ModNScalar
	defer k.Zero()
	if overflow := k.SetBytes(&key); overflow != 0 || k.IsZero() {
		return nil, errors.New("nostr: BIP-32: this seed gives an invalid master key (try another mnemonic)")
	}
	data := make([]byte, 37)
	defer clear(data)
	for _, index := range path {
		if index >= hardened {
			data[0] = 0
			copy(data[1:33], key[:])
		} else {
			priv, _ := btcec.PrivKeyFromBytes(key[:])
			copy(data[:33], priv.PubKey().SerializeCompressed())
			priv.Zero()
		}
		binary.BigEndian.PutUint32(data[33:], index)
		mac := hmac.New(sha512.New, chain[:])
		mac.Write(data)
		I := mac.Sum(nil)
		var il [32]byte
		copy(il[:], I[:32])
		copy(chain[:], I[32:])
		clear(I)
		var t btcec.ModNScalar
		overflow := t.SetBytes(&il)
		clear(il[:])
		k.Add(&t)
		t.Zero()
		if overflow != 0 || k.IsZero() {
			// BIP-32 says to skip to the next index; the odds are below 2^-127.
			return nil, fmt.Errorf("nostr: BIP-32: index %d gives an invalid key", index)
		}
		k.PutBytes(&key)
	}
	return SecretKeyFromBytes(key[:])
}
