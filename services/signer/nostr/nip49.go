package nostr

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/scrypt"
	"golang.org/x/text/unicode/norm"
)

// NIP-49: a secret key encrypted with a password (ncryptsec1…):
// scrypt(NFKC(password), salt, 2^logN, r=8, p=1) → XChaCha20-Poly1305.

// Key security bytes of NIP-49 (the associated data).
const (
	KeySecurityInsecure byte = 0x00 // known to have been handled insecurely
	KeySecuritySecure   byte = 0x01 // not known to have been handled insecurely
	KeySecurityUnknown  byte = 0x02 // not tracked
)

// MaxNcryptsecLogN bounds scrypt's cost (2^22 rounds need 4 GiB): a
// hostile ncryptsec cannot make the process allocate more.
const MaxNcryptsecLogN = 22

const (
	ncryptsecVersion = 0x02
	ncryptsecLen     = 91 // version 1 + logN 1 + salt 16 + nonce 24 + ad 1 + ciphertext 48
)

// EncryptNcryptsec encrypts k with a password (NFKC-normalised) as an
// ncryptsec1… string. logN is scrypt's cost, 2^logN rounds (NIP-49
// suggests 16 or more; 1 to MaxNcryptsecLogN accepted); keySecurity is
// one of the KeySecurity constants.
func EncryptNcryptsec(k *SecretKey, password string, logN uint8, keySecurity byte) (string, error) {
	if k.Wiped() {
		return "", ErrKeyWiped
	}
	if logN < 1 || logN > MaxNcryptsecLogN {
		return "", fmt.Errorf("nostr: ncryptsec: log_n %d out of range: use 1 to %d (16 or more for real keys)", logN, MaxNcryptsecLogN)
	}
	if keySecurity > KeySecurityUnknown {
		return "", fmt.Errorf("nostr: ncryptsec: key security byte %#02x unknown: use 0x00, 0x01 or 0x02", keySecurity)
	}
	out := make([]byte, 0, ncryptsecLen)
	out = append(out, ncryptsecVersion, logN)
	var salt [16]byte
	var nonce [24]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", fmt.Errorf("nostr: ncryptsec: reading random bytes: %w", err)
	}
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("nostr: ncryptsec: reading random bytes: %w", err)
	}
	out = append(out, salt[:]...)
	out = append(out, nonce[:]...)
	out = append(out, keySecurity)
	aead, err := ncryptsecAEAD(password, salt[:], logN)
	if err != nil {
		return "", err
	}
	out = aead.Seal(out, nonce[:], k.b[:], []byte{keySecurity})
	return bech32Encode("ncryptsec", out), nil
}

func ncryptsecAEAD(password string, salt []byte, logN uint8) (cipher.AEAD, error) {
	pw := []byte(norm.NFKC.String(password))
	defer clear(pw)
	key, err := scrypt.Key(pw, salt, 1<<logN, 8, 1, 32)
	if err != nil {
		return nil, fmt.Errorf("nostr: ncryptsec: scrypt: %w", err)
	}
	defer clear(key)
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("nostr: ncryptsec: %w", err)
	}
	return aead, nil
}

// NcryptsecInfo reads an ncryptsec's scrypt cost and key security byte
// without decrypting it (cheap: no scrypt).
func NcryptsecInfo(ncryptsec string) (logN uint8, keySecurity byte, err error) {
	data, err := ncryptsecData(ncryptsec)
	if err != nil {
		return 0, 0, err
	}
	return data[1], data[42], nil
}

func ncryptsecData(s string) ([]byte, error) {
	prefix, data, err := bech32Decode(s)
	if err != nil {
		return nil, fmt.Errorf("nostr: ncryptsec: %w", err)
	}
	if prefix != "ncryptsec" {
		return nil, fmt.Errorf("nostr: ncryptsec: wrong prefix %q, want \"ncryptsec\"", prefix)
	}
	if len(data) != ncryptsecLen {
		return nil, fmt.Errorf("nostr: ncryptsec: holds %d bytes, want %d", len(data), ncryptsecLen)
	}
	if data[0] != ncryptsecVersion {
		return nil, fmt.Errorf("nostr: ncryptsec: unsupported version %#02x, want 0x02", data[0])
	}
	return data, nil
}

// DecryptNcryptsec decrypts an ncryptsec1… string with its password
// (NFKC-normalised). It refuses a log_n above MaxNcryptsecLogN.
func DecryptNcryptsec(ncryptsec, password string) (*SecretKey, error) {
	data, err := ncryptsecData(ncryptsec)
	if err != nil {
		return nil, err
	}
	logN := data[1]
	if logN < 1 || logN > MaxNcryptsecLogN {
		return nil, fmt.Errorf("nostr: ncryptsec: log_n %d is above the supported maximum %d (or zero)", logN, MaxNcryptsecLogN)
	}
	salt, nonce, ad, ct := data[2:18], data[18:42], data[42:43], data[43:]
	if ad[0] > KeySecurityUnknown {
		return nil, fmt.Errorf("nostr: ncryptsec: unknown key security byte %#02x", ad[0])
	}
	aead, err := ncryptsecAEAD(password, salt, logN)
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, nonce, ct, ad)
	if err != nil {
		return nil, errors.New("nostr: ncryptsec: wrong password (or a corrupted ncryptsec)")
	}
	defer clear(plain)
	return SecretKeyFromBytes(plain)
}
