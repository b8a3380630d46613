package nostr

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcec/v2"
	"golang.org/x/crypto/chacha20"
)

// NIP-44 version 2 encrypted payloads, including the extended 6-byte
// length prefix for plaintexts of 65536 bytes and more.

const (
	nip44Version       = 2
	nip44MinPlaintext  = 1
	nip44MaxPlaintext  = 1<<32 - 1
	nip44ExtendedFrom  = 65536
	nip44MinPayloadB64 = 132
	nip44MinData       = 99
)

// ConversationKey returns the NIP-44 v2 conversation key between k and
// the peer's x-only public key (64 hex characters): HKDF-extract(salt
// "nip44-v2", x coordinate of k·P). It is the same from either side.
// The caller should clear it after use.
func ConversationKey(k *SecretKey, peerPub string) ([32]byte, error) {
	var ck [32]byte
	shared, err := sharedX(k, peerPub)
	if err != nil {
		return ck, err
	}
	defer clear(shared)
	prk, err := hkdf.Extract(sha256.New, shared, []byte("nip44-v2"))
	if err != nil {
		return ck, fmt.Errorf("nostr: nip44: %w", err)
	}
	copy(ck[:], prk)
	clear(prk)
	return ck, nil
}

// sharedX is unhashed ECDH: the 32-byte x coordinate of k·P.
func sharedX(k *SecretKey, peerPub string) ([]byte, error) {
	pub, err := parsePoint("peer public key", peerPub)
	if err != nil {
		return nil, err
	}
	priv, err := k.privKey()
	if err != nil {
		return nil, err
	}
	defer priv.Zero()
	return btcec.GenerateSharedSecret(priv, pub), nil
}

// nip44MessageKeys returns chacha key, chacha nonce and hmac key.
func nip44MessageKeys(convKey [32]byte, nonce []byte) (chachaKey, chachaNonce, hmacKey []byte, err error) {
	if len(nonce) != 32 {
		return nil, nil, nil, fmt.Errorf("nostr: nip44: nonce is %d bytes, want 32", len(nonce))
	}
	keys, err := hkdf.Expand(sha256.New, convKey[:], string(nonce), 76)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nostr: nip44: %w", err)
	}
	return keys[0:32], keys[32:44], keys[44:76], nil
}

// nip44PaddedLen is calc_padded_len: the padded size of a plaintext of n
// bytes (without the length prefix). It needs 64 bits: up to 2^32.
func nip44PaddedLen(n uint64) uint64 {
	if n <= 32 {
		return 32
	}
	nextPower := uint64(1) << bits.Len64(n-1) // 1 << (floor(log2(n-1)) + 1)
	chunk := uint64(32)
	if nextPower > 256 {
		chunk = nextPower / 8
	}
	return chunk * ((n-1)/chunk + 1)
}

func nip44Pad(plaintext string) ([]byte, error) {
	n := uint64(len(plaintext))
	if n < nip44MinPlaintext || n > nip44MaxPlaintext {
		return nil, fmt.Errorf("nostr: nip44: plaintext is %d bytes; it must be 1 to %d", n, uint64(nip44MaxPlaintext))
	}
	prefix := 2
	if n >= nip44ExtendedFrom {
		prefix = 6
	}
	out := make([]byte, uint64(prefix)+nip44PaddedLen(n))
	if prefix == 2 {
		binary.BigEndian.PutUint16(out, uint16(n))
	} else {
		binary.BigEndian.PutUint32(out[2:], uint32(n))
	}
	copy(out[prefix:], plaintext)
	return out, nil
}

func nip44Unpad(padded []byte) (string, error) {
	if len(padded) < 2 {
		return "", errors.New("nostr: nip44: invalid padding: too short")
	}
	n := uint64(binary.BigEndian.Uint16(padded))
	prefix := uint64(2)
	if n == 0 {
		if len(padded) < 6 {
			return "", errors.New("nostr: nip44: invalid padding: too short for the extended length prefix")
		}
		n = uint64(binary.BigEndian.Uint32(padded[2:]))
		if n < nip44ExtendedFrom {
			return "", fmt.Errorf("nostr: nip44: invalid padding: extended length prefix holds %d, below %d", n, nip44ExtendedFrom)
		}
		prefix = 6
	}
	if uint64(len(padded)) != prefix+nip44PaddedLen(n) {
		return "", fmt.Errorf("nostr: nip44: invalid padding: %d padded bytes for a plaintext of %d bytes", uint64(len(padded))-prefix, n)
	}
	plain := padded[prefix : prefix+n]
	if !utf8.Valid(plain) {
		return "", errors.New("nostr: nip44: plaintext is not valid UTF-8")
	}
	return string(plain), nil
}

// Nip44Encrypt encrypts a plaintext (1 byte to 2^32-1 bytes of UTF-8)
// under a conversation key with a random nonce from crypto/rand, and
// returns the base64 payload.
func Nip44Encrypt(plaintext string, convKey [32]byte) (string, error) {
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("nostr: nip44: reading random bytes: %w", err)
	}
	return Nip44EncryptWithNonce(plaintext, convKey, nonce)
}

// Nip44EncryptWithNonce is Nip44Encrypt with the nonce given: for test
// vectors only; a nonce must never be reused.
func Nip44EncryptWithNonce(plaintext string, convKey [32]byte, nonce [32]byte) (string, error) {
	padded, err := nip44Pad(plaintext)
	if err != nil {
		return "", err
	}
	defer clear(padded)
	ck, cn, hk, err := nip44MessageKeys(convKey, nonce[:])
	if err != nil {
		return "", err
	}
	defer clear(ck)
	defer clear(hk)
	c, err := chacha20.NewUnauthenticatedCipher(ck, cn)
	if err != nil {
		return "", fmt.Errorf("nostr: nip44: %w", err)
	}
	out := make([]byte, 1+32+len(padded)+32)
	out[0] = nip44Version
	copy(out[1:33], nonce[:])
	ct := out[33 : 33+len(padded)]
	c.XORKeyStream(ct, padded)
	mac := nip44MAC(hk, nonce[:], ct)
	copy(out[33+len(padded):], mac)
	return base64.StdEncoding.EncodeToString(out), nil
}

func nip44MAC(hmacKey, nonce, ciphertext []byte) []byte {
	h := hmac.New(sha256.New, hmacKey)
	h.Write(nonce)
	h.Write(ciphertext)
	return h.Sum(nil)
}

// Nip44Decrypt decrypts a NIP-44 v2 payload with a conversation key. It
// checks the version, the sizes and the MAC (in constant time) before
// decrypting, then the padding.
func Nip44Decrypt(payload string, convKey [32]byte) (string, error) {
	if payload == "" || payload[0] == '#' {
		return "", errors.New("nostr: nip44: unknown encryption version (payload is empty or starts with '#')")
	}
	if len(payload) < nip44MinPayloadB64 {
		return "", fmt.Errorf("nostr: nip44: invalid payload size: %d characters, at least %d", len(payload), nip44MinPayloadB64)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", fmt.Errorf("nostr: nip44: invalid base64: %v", err)
	}
	if len(data) < nip44MinData {
		return "", fmt.Errorf("nostr: nip44: invalid data size: %d bytes, at least %d", len(data), nip44MinData)
	}
	if data[0] != nip44Version {
		return "", fmt.Errorf("nostr: nip44: unknown encryption version %d", data[0])
	}
	nonce := data[1:33]
	ct := data[33 : len(data)-32]
	mac := data[len(data)-32:]
	ck, cn, hk, err := nip44MessageKeys(convKey, nonce)
	if err != nil {
		return "", err
	}
	defer clear(ck)
	defer clear(hk)
	if !hmac.Equal(nip44MAC(hk, nonce, ct), mac) {
		return "", errors.New("nostr: nip44: invalid MAC: wrong conversation key or a tampered payload")
	}
	c, err := chacha20.NewUnauthenticatedCipher(ck, cn)
	if err != nil {
		return "", fmt.Errorf("nostr: nip44: %w", err)
	}
	padded := make([]byte, len(ct))
	defer clear(padded)
	c.XORKeyStream(padded, ct)
	return nip44Unpad(padded)
}
