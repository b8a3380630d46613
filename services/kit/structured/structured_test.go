package structured

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func TestObjectSetMergeJSON(t *testing.T) {
	type ref struct {
		Role string `json:"role"`
		Name string `json:"name,omitempty"`
	}
	s, err := Object(struct {
		URL  string         `json:"url"`
		Refs map[string]ref `json:"refs"`
	}{"https://a.test/?q=<b>&x", map[string]ref{"e1": {Role: "button", Name: "Save"}, "e2": {Role: "link"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err = Set(s, "count", 3)
	if err != nil {
		t.Fatal(err)
	}
	s = Merge(s, mustObject(t, map[string]any{"count": 4, "ok": true}))
	const want = `{"count":4,"ok":true,"refs":{"e1":{"name":"Save","role":"button"},"e2":{"role":"link"}},"url":"https://a.test/?q=<b>&x"}`
	if got := string(JSON(s)); got != want {
		t.Errorf("JSON =\n %s\nwant\n %s", got, want)
	}

	// nil and empty sides.
	if Merge(nil, s) != s || Merge(s, nil) != s || JSON(nil) != nil {
		t.Error("Merge or JSON mishandles nil")
	}
	if s, err := Set(nil, "k", "v"); err != nil || string(JSON(s)) != `{"k":"v"}` {
		t.Errorf("Set(nil) = %s, %v", JSON(s), err)
	}

	// Errors name the problem and leave the message alone.
	if _, err := Object([]int{1}); err == nil {
		t.Error("Object of a list: no error")
	}
	if _, err := Set(s, "bad", func() {}); err == nil {
		t.Error("Set(a func): no error")
	}
	// JSON has no infinity: it is written as null, as a value with no kind.
	inf, _ := Set(nil, "n", math.Inf(1))
	if got := string(JSON(inf)); got != `{"n":null}` {
		t.Errorf("JSON(Inf) = %s", got)
	}
}

func mustObject(t *testing.T, v any) *structpb.Struct {
	t.Helper()
	s, err := Object(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJSONIsEncodingJSON checks JSON against encoding/json on the same
// content: strings with every kind of escape, numbers of every size.
func TestJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "é", "😀", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"\u2028", "\u2029", "\xff", "\xe2\x80", "/", " "}
	numbers := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-7, 1.5e-7, 1e20, 1e21, 123456789, 1 << 53, -3.25e-10, math.MaxFloat64, math.SmallestNonzeroFloat64}
	for n := range 500 {
		fields := map[string]any{}
		for range 1 + r.IntN(5) {
			var key, val strings.Builder
			for range r.IntN(6) {
				key.WriteString(pieces[r.IntN(len(pieces))])
				val.WriteString(pieces[r.IntN(len(pieces))])
			}
			fields[key.String()] = []any{val.String(), numbers[r.IntN(len(numbers))], r.IntN(2) == 0, nil,
				map[string]any{"n": numbers[r.IntN(len(numbers))]}}
		}
		s := toStruct(fields)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s.AsMap()); err != nil {
			t.Fatal(err)
		}
		if got := string(JSON(s)); got != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("document %d:\n got  %s\n want %s", n, got, want.String())
		}
	}
}

// toStruct is structpb.NewStruct without its UTF-8 check: a page's text
// may hold invalid UTF-8 until it is written.
func toStruct(m map[string]any) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range m {
		s.Fields[k] = toValue(v)
	}
	return s
}

func toValue(v any) *structpb.Value {
	switch x := v.(type) {
	case string:
		return structpb.NewStringValue(x)
	case float64:
		return structpb.NewNumberValue(x)
	case bool:
		return structpb.NewBoolValue(x)
	case []any:
		l := &structpb.ListValue{}
		for _, e := range x {
			l.Values = append(l.Values, toValue(e))
		}
		return structpb.NewListValue(l)
	case map[string]any:
		return structpb.NewStructValue(toStruct(x))
	}
	return structpb.NewNullValue()
}
