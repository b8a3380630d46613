package nostr

import (
	"errors"
	"fmt"
	"strings"
)

// Bech32 (BIP-173, not bech32m), as NIP-19 uses it, without BIP-173's
// 90-character limit: NIP-19 allows up to maxBech32Len.

const (
	bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	maxBech32Len  = 5000
)

var bech32Rev = func() (r [128]int8) {
	for i := range r {
		r[i] = -1
	}
	for i := 0; i < len(bech32Charset); i++ {
		r[bech32Charset[i]] = int8(i)
	}
	return r
}()

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		b := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (b>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func hrpExpand(hrp string) []byte {
	out := make([]byte, 0, 2*len(hrp)+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

// bech32Encode encodes data (8-bit bytes) under the human-readable part
// hrp (lower case).
func bech32Encode(hrp string, data []byte) string {
	values := convertBits8to5(data)
	chkIn := append(hrpExpand(hrp), values...)
	chkIn = append(chkIn, 0, 0, 0, 0, 0, 0)
	mod := bech32Polymod(chkIn) ^ 1
	var sb strings.Builder
	sb.Grow(len(hrp) + 1 + len(values) + 6)
	sb.WriteString(hrp)
	sb.WriteByte('1')
	for _, v := range values {
		sb.WriteByte(bech32Charset[v])
	}
	for i := range 6 {
		sb.WriteByte(bech32Charset[(mod>>(5*(5-i)))&31])
	}
	return sb.String()
}

// bech32Decode decodes a bech32 string into its (lower-case)
// human-readable part and its data as 8-bit bytes. Errors say what is
// wrong but never repeat the input, which may be a secret key.
func bech32Decode(s string) (hrp string, data []byte, err error) {
	if len(s) > maxBech32Len {
		return "", nil, fmt.Errorf("bech32 string too long: %d characters, NIP-19 allows %d", len(s), maxBech32Len)
	}
	lower, upper := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 33 || c > 126 {
			return "", nil, fmt.Errorf("bech32: invalid character at position %d", i+1)
		}
		if c >= 'a' && c <= 'z' {
			lower = true
		}
		if c >= 'A' && c <= 'Z' {
			upper = true
		}
	}
	if lower && upper {
		return "", nil, errors.New("bech32: mixed upper and lower case")
	}
	s = strings.ToLower(s)
	pos := strings.LastIndexByte(s, '1')
	if pos < 1 {
		return "", nil, errors.New("bech32: missing prefix or separator '1'")
	}
	if pos+7 > len(s) {
		return "", nil, errors.New("bech32: too short: the checksum needs 6 characters after the separator")
	}
	hrp = s[:pos]
	values := make([]byte, 0, len(s)-pos-1)
	for i := pos + 1; i < len(s); i++ {
		v := bech32Rev[s[i]]
		if v < 0 {
			// The position only: the string may be an nsec, and its
			// characters are the secret.
			return "", nil, fmt.Errorf("bech32: character %d is not in the bech32 alphabet (it has no b, i, o or 1 after the separator)", i+1)
		}
		values = append(values, byte(v))
	}
	if bech32Polymod(append(hrpExpand(hrp), values...)) != 1 {
		return "", nil, fmt.Errorf("bech32: bad checksum (a typo or a truncated %s string?)", hrp)
	}
	data, err = convertBits5to8(values[:len(values)-6])
	clear(values)
	if err != nil {
		return "", nil, err
	}
	return hrp, data, nil
}

func convertBits8to5(data []byte) []byte {
	out := make([]byte, 0, (len(data)*8+4)/5)
	var acc uint32
	bits := 0
	for _, b := range data {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out = append(out, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		out = append(out, byte(acc<<(5-bits))&31)
	}
	return out
}

func convertBits5to8(values []byte) ([]byte, error) {
	out := make([]byte, 0, len(values)*5/8)
	var acc uint32
	bits := 0
	for _, v := range values {
		acc = acc<<5 | uint32(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || (acc<<(8-bits))&0xff != 0 {
		return nil, errors.New("bech32: invalid padding in the data part")
	}
	return out, nil
}
