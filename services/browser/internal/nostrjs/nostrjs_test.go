package nostrjs

import (
	"strings"
	"testing"
)

// TestSource: every placeholder is filled, the names as string literals
// and the limits as numbers.
func TestSource(t *testing.T) {
	src := Source("__sovNostrab12", "__sovNostrReplycd34")
	for _, want := range []string{`BINDING = "__sovNostrab12"`, `REPLY = "__sovNostrReplycd34"`, "MAX = 262144", "MAX_PENDING = 16"} {
		if !strings.Contains(src, want) {
			t.Errorf("Source lacks %s", want)
		}
	}
	if strings.Contains(src, "__BINDING__") || strings.Contains(src, "__REPLY__") || strings.Contains(src, "__MAX") {
		t.Error("Source left a placeholder")
	}
	if got, want := ReplyFunction("__sovNostrReplycd34"), "function (t, i, k, v) { __sovNostrReplycd34(t, i, k, v); }"; got != want {
		t.Errorf("ReplyFunction = %q, want %q", got, want)
	}
}
