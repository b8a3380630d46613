// Package structured builds a tool's structured content: a JSON object
// carried as a google.protobuf.Struct from where a tool makes it (a
// browser worker, a gateway handler) to the edge that writes it out (the
// MCP adapter, the agent's tool loop). Values are converted once, when a
// tool sets them; merging, scrubbing and routing work on the typed message,
// and only the edge writes JSON (with JSON, the function below).
package structured

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// Value converts v, any value encoding/json can write, to a Struct value.
// It is the one conversion: struct tags and MarshalJSON methods apply as
// they would in JSON. Numbers become float64, so an integer above 2^53
// loses precision (no tool's structured content holds one).
func Value(v any) (*structpb.Value, error) {
	if out, err := structpb.NewValue(v); err == nil {
		// Strings, numbers, bools, nil, and maps and slices of them
		// convert directly, as encoding/json would write them.
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("structured content: %w", err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, fmt.Errorf("structured content: %w", err)
	}
	out, err := structpb.NewValue(generic)
	if err != nil {
		return nil, fmt.Errorf("structured content: %w", err)
	}
	return out, nil
}

// Object converts v, which must encode as a JSON object (a struct or a
// map), to a Struct.
func Object(v any) (*structpb.Struct, error) {
	val, err := Value(v)
	if err != nil {
		return nil, err
	}
	s := val.GetStructValue()
	if s == nil {
		return nil, fmt.Errorf("structured content: %T is not a JSON object", v)
	}
	return s, nil
}

// Set returns s with key set to v, allocating s when it is nil. A value
// that cannot be converted leaves s as it was and is the error.
func Set(s *structpb.Struct, key string, v any) (*structpb.Struct, error) {
	val, err := Value(v)
	if err != nil {
		return s, err
	}
	if s == nil {
		s = &structpb.Struct{}
	}
	if s.Fields == nil {
		s.Fields = map[string]*structpb.Value{}
	}
	s.Fields[key] = val
	return s, nil
}

// Merge returns a with b's keys added, b's value winning for a key both
// have. It changes and returns a, or returns b when a is empty.
func Merge(a, b *structpb.Struct) *structpb.Struct {
	switch {
	case len(b.GetFields()) == 0:
		return a
	case len(a.GetFields()) == 0:
		return b
	}
	for k, v := range b.GetFields() {
		a.Fields[k] = v
	}
	return a
}

// JSON writes s as a JSON object, or nil for an unset s: what an edge hands
// its client. It writes what encoding/json writes for s.AsMap() with HTML
// escaping off (keys sorted; <, > and & as they are: the JSON is for models
// and programs, not HTML), without building the map.
func JSON(s *structpb.Struct) json.RawMessage {
	if s == nil {
		return nil
	}
	return appendStruct(nil, s)
}

func appendStruct(b []byte, s *structpb.Struct) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(s.GetFields())) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendValue(b, s.Fields[k])
	}
	return append(b, '}')
}

func appendValue(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_NumberValue:
		return appendNumber(b, k.NumberValue)
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue)
	case *structpb.Value_StructValue:
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	}
	return append(b, "null"...) // null, or a value with no kind
}

// appendNumber writes f as encoding/json does; NaN and the infinities,
// which JSON cannot hold (and Value never makes), as null.
func appendNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-09 → e-9
		b = b[:n-1]
	}
	return b
}

// appendString writes s as a JSON string as encoding/json does with HTML
// escaping off: invalid UTF-8 becomes U+FFFD, and U+2028 and U+2029 are
// escaped (JavaScript reads them as line ends).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
