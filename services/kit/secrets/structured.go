package secrets

import (
	"encoding/json"
	"math"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
)

// ScrubStruct is Scrub for a tool's structured content (a JSON object as a
// protobuf Struct), done on the message itself: every key and string is
// scrubbed, and a number or literal whose JSON text holds a value (a PIN)
// becomes the placeholder as a string, as ScrubJSON does with the same
// object as text. It changes s in place.
func (c *Cache) ScrubStruct(s *structpb.Struct) {
	if c == nil || s == nil {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.m == nil || len(c.m.heads) == 0 {
		return
	}
	c.m.scrubStruct(s)
}

func (m *matcher) scrubStruct(s *structpb.Struct) {
	var renamed map[string]*structpb.Value
	for k, v := range s.GetFields() {
		m.scrubValue(v)
		if nk := m.replace(k); !sameString(nk, k) {
			if renamed == nil {
				renamed = map[string]*structpb.Value{}
			}
			renamed[nk] = v
			delete(s.Fields, k)
		}
	}
	for k, v := range renamed {
		s.Fields[k] = v
	}
}

func (m *matcher) scrubValue(v *structpb.Value) {
	var literal string
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		if out := m.replace(x.StringValue); !sameString(out, x.StringValue) {
			x.StringValue = out
		}
		return
	case *structpb.Value_StructValue:
		m.scrubStruct(x.StructValue)
		return
	case *structpb.Value_ListValue:
		for _, e := range x.ListValue.GetValues() {
			m.scrubValue(e)
		}
		return
	case *structpb.Value_NumberValue:
		literal = jsonNumber(x.NumberValue)
	case *structpb.Value_BoolValue:
		literal = strconv.FormatBool(x.BoolValue)
	case *structpb.Value_NullValue:
		literal = "null"
	default:
		return
	}
	if _, p := m.find(literal, 0); p != nil {
		v.Kind = &structpb.Value_StringValue{StringValue: p.repl}
	}
}

// jsonNumber is f as encoding/json writes it: what the edge shows.
func jsonNumber(f float64) string {
	if a := math.Abs(f); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	b, err := json.Marshal(f)
	if err != nil { // NaN or ±Inf, which have no JSON text (structured.Value never makes them)
		return "null"
	}
	return string(b)
}
