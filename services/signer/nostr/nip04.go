package nostr

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// NIP-04 (deprecated, still used by NIP-07 pages and NIP-46 bunkers):
// AES-256-CBC with PKCS#7 padding, the key being the unhashed x
// coordinate of the ECDH shared point, as "<base64 ciphertext>?iv=<base64 iv>".

// Nip04Encrypt encrypts plaintext for peerPub (64 hex) with a random IV.
func Nip04Encrypt(k *SecretKey, peerPub, plaintext string) (string, error) {
	var iv [16]byte
	if _, err := rand.Read(iv[:]); err != nil {
		return "", fmt.Errorf("nostr: nip04: reading random bytes: %w", err)
	}
	return nip04EncryptIV(k, peerPub, plaintext, iv)
}

func nip04EncryptIV(k *SecretKey, peerPub, plaintext string, iv [16]byte) (string, error) {
	block, err := nip04Cipher(k, peerPub)
	if err != nil {
		return "", err
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	buf := make([]byte, len(plaintext)+pad)
	copy(buf, plaintext)
	for i := len(plaintext); i < len(buf); i++ {
		buf[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, iv[:]).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf) + "?iv=" + base64.StdEncoding.EncodeToString(iv[:]), nil
}

// Nip04Decrypt decrypts a NIP-04 payload from peerPub (64 hex).
func Nip04Decrypt(k *SecretKey, peerPub, payload string) (string, error) {
	ctB64, ivB64, ok := strings.Cut(payload, "?iv=")
	if !ok {
		return "", errors.New(`nostr: nip04: payload has no "?iv=" part`)
	}
	ct, err := base64.StdEncoding.DecodeString(ctB64)
	if err != nil {
		return "", fmt.Errorf("nostr: nip04: ciphertext is not base64: %v", err)
	}
	iv, err := base64.StdEncoding.DecodeString(ivB64)
	if err != nil {
		return "", fmt.Errorf("nostr: nip04: iv is not base64: %v", err)
	}
	if len(iv) != aes.BlockSize {
		return "", fmt.Errorf("nostr: nip04: iv is %d bytes, want %d", len(iv), aes.BlockSize)
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return "", fmt.Errorf("nostr: nip04: ciphertext is %d bytes, want a non-zero multiple of %d", len(ct), aes.BlockSize)
	}
	block, err := nip04Cipher(k, peerPub)
	if err != nil {
		return "", err
	}
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(ct, ct)
	defer clear(ct)
	pad := int(ct[len(ct)-1])
	if pad < 1 || pad > aes.BlockSize || !bytes.Equal(ct[len(ct)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return "", errors.New("nostr: nip04: bad padding: wrong key or a corrupted payload")
	}
	plain := ct[:len(ct)-pad]
	if !utf8.Valid(plain) {
		return "", errors.New("nostr: nip04: plaintext is not valid UTF-8: wrong key or a corrupted payload")
	}
	return string(plain), nil
}

// nip04Cipher is AES-256 keyed with the x coordinate of the ECDH point of
// k and peerPub.
func nip04Cipher(k *SecretKey, peerPub string) (cipher.Block, error) {
	key, err := sharedX(k, peerPub)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("nostr: nip04: %w", err)
	}
	return block, nil
}
