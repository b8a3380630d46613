package structured

import (
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// refCount is the refs of a big page's snapshot.
var refCount = 2000

// BenchmarkSnapshotFacts carries a big snapshot's structured content (2,000
// refs) from where the worker makes it to the JSON the edge writes, as a
// Struct (the way it travels) and as JSON text (the way it used to).
func BenchmarkSnapshotFacts(b *testing.B) {
	type ref struct {
		Role string `json:"role"`
		Name string `json:"name,omitempty"`
	}
	refs := map[string]ref{}
	for i := range refCount {
		refs[fmt.Sprintf("e%d", i)] = ref{Role: "link", Name: fmt.Sprintf("Item number %d of the list", i)}
	}
	facts := struct {
		URL  string         `json:"url"`
		Refs map[string]ref `json:"refs"`
	}{"https://a.test/", refs}
	b.Run("struct", func(b *testing.B) {
		for b.Loop() {
			// Built as the snapshot builds it.
			refMap := make(map[string]*structpb.Value, len(refs))
			for k, r := range refs {
				refMap[k] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
					"role": structpb.NewStringValue(r.Role), "name": structpb.NewStringValue(r.Name)}})
			}
			s := &structpb.Struct{Fields: map[string]*structpb.Value{
				"url": structpb.NewStringValue(facts.URL), "refs": structpb.NewStructValue(&structpb.Struct{Fields: refMap})}}
			wire, _ := proto.Marshal(s)
			var back structpb.Struct
			if err := proto.Unmarshal(wire, &back); err != nil {
				b.Fatal(err)
			}
			_ = JSON(&back)
		}
	})
	// What it cost as JSON text inside the proto, for comparison.
	b.Run("json-text", func(b *testing.B) {
		for b.Loop() {
			text, _ := json.Marshal(facts)
			wire, _ := proto.Marshal(structpb.NewStringValue(string(text)))
			var back structpb.Value
			_ = proto.Unmarshal(wire, &back)
			if !json.Valid([]byte(back.GetStringValue())) {
				b.Fatal("invalid")
			}
			_, _ = json.Marshal(json.RawMessage(back.GetStringValue()))
		}
	})
}
