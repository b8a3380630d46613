package secrets

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sovereign-fleet/sovereign/services/kit/structured"
)

// TestScrubStruct checks that scrubbing structured content as a message
// gives what scrubbing the same object as JSON text gives: keys, strings
// (whatever escapes the text had) and numbers that hold a value.
func TestScrubStruct(t *testing.T) {
	c, doc, want := scrubCase(t)
	s, err := structured.Object(doc)
	if err != nil {
		t.Fatal(err)
	}
	c.ScrubStruct(s)
	if got, w := string(structured.JSON(s)), canonical(t, want); got != w {
		t.Errorf("ScrubStruct:\n got  %s\n want %s", got, w)
	}

	// Random documents: the message and the text agree.
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("ab9 \"\\<&é😀\n")
	for n := range 200 {
		items := make([]any, 5)
		for i := range items {
			switch r.IntN(4) {
			case 0:
				items[i] = 482913 + r.IntN(2)
			case 1:
				items[i] = map[string]any{string(alphabet[r.IntN(len(alphabet))]) + doc["value"].(string): r.IntN(3) == 0}
			default:
				items[i] = string(alphabet[r.IntN(len(alphabet))]) + doc["value"].(string) + "nABCDE"[:r.IntN(7)]
			}
		}
		in := map[string]any{"items": items}
		s, err := structured.Object(in)
		if err != nil {
			t.Fatal(err)
		}
		c.ScrubStruct(s)
		var viaText any
		if err := json.Unmarshal(c.ScrubJSON([]byte(mustJSON(t, in))), &viaText); err != nil {
			t.Fatal(err)
		}
		if got, w := string(structured.JSON(s)), canonical(t, viaText); got != w {
			t.Fatalf("document %d: ScrubStruct and ScrubJSON differ:\n struct %s\n json   %s", n, got, w)
		}
		if strings.Contains(string(structured.JSON(s)), "482913") {
			t.Fatalf("document %d: the PIN is left in %s", n, structured.JSON(s))
		}
	}

	// Nothing to scrub, nothing changes; a nil cache or message is fine.
	clean, _ := structpb.NewStruct(map[string]any{"a": "b", "n": []any{1.0, 2.0}})
	before := string(structured.JSON(clean))
	c.ScrubStruct(clean)
	if after := string(structured.JSON(clean)); after != before {
		t.Errorf("ScrubStruct changed clean content: %s -> %s", before, after)
	}
	var none *Cache
	none.ScrubStruct(clean)
	c.ScrubStruct(nil)
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonical is v as the edge writes it.
func canonical(t testing.TB, v any) string {
	t.Helper()
	s, err := structured.Object(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(structured.JSON(s))
}
