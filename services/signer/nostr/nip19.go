package nostr

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// NIP-19 bech32 entities.

// ProfilePointer is the value of a decoded nprofile.
type ProfilePointer struct {
	PubKey string   `json:"pubkey"` // 64 hex
	Relays []string `json:"relays,omitempty"`
}

// EventPointer is the value of a decoded nevent.
type EventPointer struct {
	ID     string   `json:"id"` // 64 hex
	Relays []string `json:"relays,omitempty"`
	Author string   `json:"author,omitempty"` // 64 hex, optional
	Kind   *int     `json:"kind,omitempty"`   // optional
}

// EntityPointer is the value of a decoded naddr: an addressable event's
// coordinate.
type EntityPointer struct {
	Identifier string   `json:"identifier"` // the "d" tag; "" for replaceable events
	PubKey     string   `json:"pubkey"`     // 64 hex
	Kind       int      `json:"kind"`
	Relays     []string `json:"relays,omitempty"`
}

// TLV types of NIP-19.
const (
	tlvSpecial = 0
	tlvRelay   = 1
	tlvAuthor  = 2
	tlvKind    = 3
)

// EncodeNpub encodes a public key (64 hex characters, a point on the
// curve) as npub1….
func EncodeNpub(pubHex string) (string, error) {
	if _, err := parsePoint("public key", pubHex); err != nil {
		return "", err
	}
	b, _ := hex.DecodeString(pubHex)
	return bech32Encode("npub", b), nil
}

// EncodeNsec encodes a secret key as nsec1…; "" for a wiped key.
func EncodeNsec(k *SecretKey) string {
	if k.Wiped() {
		return ""
	}
	return bech32Encode("nsec", k.b[:])
}

// EncodeNote encodes an event id (64 hex characters) as note1….
func EncodeNote(idHex string) (string, error) {
	b, err := hex32("event id", idHex)
	if err != nil {
		return "", err
	}
	return bech32Encode("note", b), nil
}

// EncodeNprofile encodes a profile (pubkey and optional relays) as
// nprofile1….
func EncodeNprofile(p ProfilePointer) (string, error) {
	if _, err := parsePoint("public key", p.PubKey); err != nil {
		return "", err
	}
	pk, _ := hex.DecodeString(p.PubKey)
	buf := appendTLV(nil, tlvSpecial, pk)
	buf, err := appendRelays(buf, p.Relays)
	if err != nil {
		return "", err
	}
	return bech32Encode("nprofile", buf), nil
}

// EncodeNevent encodes an event pointer as nevent1….
func EncodeNevent(p EventPointer) (string, error) {
	id, err := hex32("event id", p.ID)
	if err != nil {
		return "", err
	}
	buf := appendTLV(nil, tlvSpecial, id)
	if buf, err = appendRelays(buf, p.Relays); err != nil {
		return "", err
	}
	if p.Author != "" {
		a, err := hex32("author", p.Author)
		if err != nil {
			return "", err
		}
		buf = appendTLV(buf, tlvAuthor, a)
	}
	if p.Kind != nil {
		if *p.Kind < 0 || int64(*p.Kind) > 0xffffffff {
			return "", fmt.Errorf("nostr: kind %d does not fit 32 bits", *p.Kind)
		}
		buf = appendTLV(buf, tlvKind, binary.BigEndian.AppendUint32(nil, uint32(*p.Kind)))
	}
	return bech32Encode("nevent", buf), nil
}

// EncodeNaddr encodes an addressable event's coordinate as naddr1….
func EncodeNaddr(p EntityPointer) (string, error) {
	if len(p.Identifier) > 255 {
		return "", fmt.Errorf("nostr: naddr identifier is %d bytes, at most 255 fit", len(p.Identifier))
	}
	pk, err := hex32("pubkey", p.PubKey)
	if err != nil {
		return "", err
	}
	if p.Kind < 0 || int64(p.Kind) > 0xffffffff {
		return "", fmt.Errorf("nostr: kind %d does not fit 32 bits", p.Kind)
	}
	buf := appendTLV(nil, tlvSpecial, []byte(p.Identifier))
	if buf, err = appendRelays(buf, p.Relays); err != nil {
		return "", err
	}
	buf = appendTLV(buf, tlvAuthor, pk)
	buf = appendTLV(buf, tlvKind, binary.BigEndian.AppendUint32(nil, uint32(p.Kind)))
	return bech32Encode("naddr", buf), nil
}

func appendTLV(buf []byte, t byte, v []byte) []byte {
	buf = append(buf, t, byte(len(v)))
	return append(buf, v...)
}

func appendRelays(buf []byte, relays []string) ([]byte, error) {
	for _, r := range relays {
		if len(r) > 255 {
			return nil, fmt.Errorf("nostr: relay URL is %d bytes, at most 255 fit in a TLV", len(r))
		}
		buf = appendTLV(buf, tlvRelay, []byte(r))
	}
	return buf, nil
}

func hex32(what, s string) ([]byte, error) {
	if len(s) != 64 {
		return nil, fmt.Errorf("nostr: %s must be 64 hex characters, got %d", what, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("nostr: %s is not hex", what)
	}
	return b, nil
}

// Decode decodes a NIP-19 bech32 entity. prefix is its human-readable
// part and value:
//
//	npub     string          public key, 64 hex (a point on the curve)
//	nsec     *SecretKey
//	note     string          event id, 64 hex
//	nprofile ProfilePointer
//	nevent   EventPointer
//	naddr    EntityPointer
//
// Unknown TLV types are ignored, as NIP-19 says. Errors name the problem
// ("bad checksum", "unknown prefix", a missing or wrong-sized TLV …) and
// never repeat the input.
func Decode(bech string) (prefix string, value any, err error) {
	bech = strings.TrimSpace(bech)
	bech = strings.TrimPrefix(bech, "nostr:") // NIP-21 URIs
	prefix, data, err := bech32Decode(bech)
	if err != nil {
		return "", nil, fmt.Errorf("nostr: nip19: %w", err)
	}
	switch prefix {
	case "npub":
		if len(data) != 32 {
			return prefix, nil, fmt.Errorf("nostr: nip19: npub holds %d bytes, want 32", len(data))
		}
		pk := hex.EncodeToString(data)
		if _, err := parsePoint("npub public key", pk); err != nil {
			return prefix, nil, err
		}
		return prefix, pk, nil
	case "nsec":
		defer clear(data)
		if len(data) != 32 {
			return prefix, nil, fmt.Errorf("nostr: nip19: nsec holds %d bytes, want 32", len(data))
		}
		k, err := SecretKeyFromBytes(data)
		if err != nil {
			return prefix, nil, err
		}
		return prefix, k, nil
	case "note":
		if len(data) != 32 {
			return prefix, nil, fmt.Errorf("nostr: nip19: note holds %d bytes, want 32", len(data))
		}
		return prefix, hex.EncodeToString(data), nil
	case "nprofile":
		tlv, err := parseTLV(prefix, data)
		if err != nil {
			return prefix, nil, err
		}
		pk, err := tlv.need32(tlvSpecial, "pubkey")
		if err != nil {
			return prefix, nil, err
		}
		if _, err := parsePoint("nprofile public key", pk); err != nil {
			return prefix, nil, err
		}
		return prefix, ProfilePointer{PubKey: pk, Relays: tlv.relays()}, nil
	case "nevent":
		tlv, err := parseTLV(prefix, data)
		if err != nil {
			return prefix, nil, err
		}
		id, err := tlv.need32(tlvSpecial, "event id")
		if err != nil {
			return prefix, nil, err
		}
		p := EventPointer{ID: id, Relays: tlv.relays()}
		if _, ok := tlv[tlvAuthor]; ok {
			if p.Author, err = tlv.need32(tlvAuthor, "author"); err != nil {
				return prefix, nil, err
			}
		}
		if _, ok := tlv[tlvKind]; ok {
			k, err := tlv.kind()
			if err != nil {
				return prefix, nil, err
			}
			p.Kind = &k
		}
		return prefix, p, nil
	case "naddr":
		tlv, err := parseTLV(prefix, data)
		if err != nil {
			return prefix, nil, err
		}
		d, ok := tlv[tlvSpecial]
		if !ok {
			return prefix, nil, errors.New("nostr: nip19: naddr has no identifier (TLV 0)")
		}
		pk, err := tlv.need32(tlvAuthor, "author")
		if err != nil {
			return prefix, nil, err
		}
		if _, ok := tlv[tlvKind]; !ok {
			return prefix, nil, errors.New("nostr: nip19: naddr has no kind (TLV 3)")
		}
		k, err := tlv.kind()
		if err != nil {
			return prefix, nil, err
		}
		return prefix, EntityPointer{Identifier: string(d[0]), PubKey: pk, Kind: k, Relays: tlv.relays()}, nil
	case "ncryptsec":
		return prefix, nil, errors.New("nostr: nip19: ncryptsec is a password-encrypted secret key: decrypt it with its password (NIP-49)")
	default:
		return prefix, nil, fmt.Errorf("nostr: nip19: unknown prefix %q (want npub, nsec, note, nprofile, nevent or naddr)", prefix)
	}
}

// tlvs maps a TLV type to its values, in order.
type tlvs map[byte][][]byte

func parseTLV(prefix string, data []byte) (tlvs, error) {
	m := tlvs{}
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, fmt.Errorf("nostr: nip19: %s: truncated TLV (a lone type byte)", prefix)
		}
		t, l := data[0], int(data[1])
		if len(data) < 2+l {
			return nil, fmt.Errorf("nostr: nip19: %s: TLV type %d says %d bytes but only %d remain", prefix, t, l, len(data)-2)
		}
		m[t] = append(m[t], data[2:2+l])
		data = data[2+l:]
	}
	return m, nil
}

func (m tlvs) need32(t byte, what string) (string, error) {
	v, ok := m[t]
	if !ok {
		return "", fmt.Errorf("nostr: nip19: no %s (TLV %d)", what, t)
	}
	if len(v[0]) != 32 {
		return "", fmt.Errorf("nostr: nip19: %s (TLV %d) is %d bytes, want 32", what, t, len(v[0]))
	}
	return hex.EncodeToString(v[0]), nil
}

func (m tlvs) kind() (int, error) {
	v := m[tlvKind][0]
	if len(v) != 4 {
		return 0, fmt.Errorf("nostr: nip19: kind (TLV 3) is %d bytes, want 4", len(v))
	}
	return int(binary.BigEndian.Uint32(v)), nil
}

func (m tlvs) relays() []string {
	var out []string
	for _, r := range m[tlvRelay] {
		out = append(out, string(r))
	}
	return out
}
