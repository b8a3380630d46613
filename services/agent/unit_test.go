package agent

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	toolsv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/tools/v1"
)

// roles renders a conversation compactly: "u" user, "a" assistant, "A"
// assistant with tool calls, "t" tool; each followed by its content.
func roles(msgs []message) string {
	var b []string
	for _, m := range msgs {
		r := map[string]string{"user": "u", "assistant": "a", "tool": "t"}[m.Role]
		if m.Role == "assistant" && len(m.Calls) > 0 {
			r = "A"
		}
		b = append(b, r+":"+m.Content)
	}
	return strings.Join(b, " ")
}

// msg of n characters' worth of tokens (n/4 + 4 framing).
func msgOf(role, content string, n int, calls ...string) message {
	m := message{Role: role, Content: content + strings.Repeat(".", max(0, n-len(content)))}
	for _, id := range calls {
		m.Calls = append(m.Calls, newToolCall(id, "echo", "{}"))
	}
	return m
}

func TestFit(t *testing.T) {
	t.Parallel()
	// Each message below is 400 characters: 100 tokens + 4.
	const n = 400
	h := []message{
		msgOf("user", "q1", n), msgOf("assistant", "c1", n, "x1"), msgOf("tool", "r1", n), msgOf("assistant", "a1", n),
		msgOf("user", "q2", n), msgOf("assistant", "a2", n),
	}
	short := func(msgs []message) string {
		s := roles(msgs)
		return strings.ReplaceAll(s, ".", "")
	}
	t.Run("everything fits", func(t *testing.T) {
		msgs := append(append([]message{}, h...), msgOf("user", "new", n))
		got := fit(msgs, len(h), 10000, 0, 0)
		if got.Dropped != 0 || len(got.Messages) != 7 {
			t.Errorf("fit = %s (dropped %d)", short(got.Messages), got.Dropped)
		}
	})
	t.Run("oldest history dropped", func(t *testing.T) {
		msgs := append(append([]message{}, h...), msgOf("user", "new", n))
		// Room for the new message and 3 more: q2, a2 and a1.
		got := fit(msgs, len(h), 4*104+50, 0, 0)
		if s := short(got.Messages); s != "a:a1 u:q2 a:a2 u:new" || got.Dropped != 3 {
			t.Errorf("fit = %s (dropped %d)", s, got.Dropped)
		}
	})
	t.Run("never starts with a tool result", func(t *testing.T) {
		msgs := append(append([]message{}, h...), msgOf("user", "new", n))
		// Room for r1, a1, q2, a2: r1's call c1 is cut, so r1 goes too.
		got := fit(msgs, len(h), 5*104+50, 0, 0)
		if s := short(got.Messages); s != "a:a1 u:q2 a:a2 u:new" || got.Dropped != 3 {
			t.Errorf("fit = %s (dropped %d)", s, got.Dropped)
		}
	})
	t.Run("fixed and reserve count", func(t *testing.T) {
		msgs := append(append([]message{}, h...), msgOf("user", "new", n))
		got := fit(msgs, len(h), 4*104+50+300, 200, 100)
		if s := short(got.Messages); s != "a:a1 u:q2 a:a2 u:new" {
			t.Errorf("fit = %s", s)
		}
	})
	t.Run("run exchanges trimmed, newest kept", func(t *testing.T) {
		msgs := append(append([]message{}, h...), msgOf("user", "new", n),
			msgOf("assistant", "s1", n, "y1"), msgOf("tool", "o1", n),
			msgOf("assistant", "s2", n, "y2", "y3"), msgOf("tool", "o2", n), msgOf("tool", "o3", n))
		// Room for the user message, the newest exchange (3) and one more:
		// o1, whose call s1 is cut, so it goes too.
		got := fit(msgs, len(h), 5*104+50, 0, 0)
		if s := short(got.Messages); s != "u:new A:s2 t:o2 t:o3" {
			t.Errorf("fit = %s", s)
		}
		// No room at all: the user message and the newest exchange stay.
		got = fit(msgs, len(h), 10, 0, 0)
		if s := short(got.Messages); s != "u:new A:s2 t:o2 t:o3" {
			t.Errorf("fit with no room = %s", s)
		}
		// Room for two more: s1 and o1 come back.
		got = fit(msgs, len(h), 6*104+50, 0, 0)
		if s := short(got.Messages); s != "u:new A:s1 t:o1 A:s2 t:o2 t:o3" {
			t.Errorf("fit = %s", s)
		}
	})
}

func TestFromHistory(t *testing.T) {
	t.Parallel()
	stored := []*historyv1.ChatMessage{
		{Role: "system", Content: "old prompt"},
		{Role: "tool", Content: "orphan", ToolCallId: "zz"},
		{Role: "user", Content: "q"},
		{Role: "assistant", Content: "", ToolCallsJson: `[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{}"}},{"id":"c2","function":{"name":"echo","arguments":"{}"}}]`},
		{Role: "tool", Content: "r1", ToolCallId: "c1"},
		// c2's result was never stored: the run died.
		{Role: "user", Content: "again"},
		{Role: "assistant", Content: "bad json", ToolCallsJson: `not json`},
		{Role: "assistant", Content: ""},
	}
	got := fromHistory(stored)
	if s := roles(got); s != "u:q A: t:r1 t:error: no result was recorded for this call (the run ended before the tool answered) u:again a:bad json" {
		t.Fatalf("fromHistory = %s", s)
	}
	if got[1].Calls[1].Type != "function" || got[3].ToolCallID != "c2" {
		t.Errorf("calls %+v, synthesized %+v", got[1].Calls, got[3])
	}
}

func TestAgentSchema(t *testing.T) {
	t.Parallel()
	s, err := agentSchema(echoSchema)
	if err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if _, ok := props["session"]; ok || props["text"] == nil {
		t.Errorf("properties = %v", props)
	}
	if req := s["required"].([]any); len(req) != 1 || req[0] != "text" {
		t.Errorf("required = %v", req)
	}
	s, err = agentSchema(`{"type":"object","properties":{"session":{"type":"string"}},"required":["session"]}`)
	if err != nil || s["required"] != nil || len(s["properties"].(map[string]any)) != 0 {
		t.Errorf("session-only schema = %v, %v", s, err)
	}
	if s, err := agentSchema(""); err != nil || s["type"] != "object" || s["properties"] == nil {
		t.Errorf("empty schema = %v, %v", s, err)
	}
	if _, err := agentSchema("[1]"); err == nil {
		t.Error("an array schema was accepted")
	}
}

func TestResultText(t *testing.T) {
	t.Parallel()
	resp := &toolsv1.CallToolResponse{Content: []*toolsv1.Content{
		{Type: "text", Text: "first"},
		{Type: "image", MimeType: "image/jpeg", Data: make([]byte, 2048)},
		{Type: "text", Text: "second"},
	}}
	if got, want := resultText(resp), "first\n[image: image/jpeg, 2048 bytes — not shown to the model]\nsecond"; got != want {
		t.Errorf("resultText = %q, want %q", got, want)
	}
	long := strings.Repeat("é", MaxToolResult+10)
	got := resultText(&toolsv1.CallToolResponse{Content: []*toolsv1.Content{{Type: "text", Text: long}}})
	if !strings.HasPrefix(got, strings.Repeat("é", MaxToolResult)+"[… clipped: 10 more characters]") || len([]rune(got)) != MaxToolResult+len([]rune("[… clipped: 10 more characters]")) {
		t.Errorf("clipped result ends %q", got[len(got)-60:])
	}
	facts, _ := structpb.NewStruct(map[string]any{"a": 1})
	if got := resultText(&toolsv1.CallToolResponse{Structured: facts}); got != `{"a":1}` {
		t.Errorf("structured only = %q", got)
	}
	if got := resultText(&toolsv1.CallToolResponse{}); got != "(no output)" {
		t.Errorf("empty = %q", got)
	}
}

func TestRegisterFlags(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOVEREIGN_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
	t.Setenv("SOVEREIGN_LLM_MODEL", "qwen3:8b")
	t.Setenv("SOVEREIGN_LLM_TEMPERATURE", "0.2")
	t.Setenv("SOVEREIGN_LLM_STREAM", "false")
	t.Setenv("SOVEREIGN_AGENT_MAX_RUNS", "3")
	t.Setenv("SOVEREIGN_LLM_TIMEOUT", "45s")
	t.Setenv("SOVEREIGN_LLM_API_KEY_FILE", keyFile)
	t.Setenv("SOVEREIGN_AGENT_NAME", "agent-1")
	var errs []error
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	cfg := RegisterFlags(fs, &errs)
	RegisterStandaloneFlags(fs, cfg)
	if err := fs.Parse([]string{"--agent-max-iterations", "50", "--llm-stream"}); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if cfg.BaseURL != "http://127.0.0.1:11434/v1" || cfg.Model != "qwen3:8b" || cfg.Temperature == nil || *cfg.Temperature != 0.2 ||
		cfg.NoStream || cfg.MaxRuns != 3 || cfg.LLMTimeout != 45*time.Second || cfg.APIKey != "sk-from-file" || cfg.Name != "agent-1" ||
		cfg.MaxIterations != 50 || cfg.Listen != DefaultListen || cfg.ToolTimeout != DefaultToolTimeout || cfg.ContextTokens != DefaultContextTokens {
		t.Errorf("config = %+v", cfg)
	}
	if err := cfg.withDefaults().Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if fs.Lookup("llm-api-key") != nil {
		t.Error("the API key has a flag: it would show in ps")
	}

	t.Setenv("SOVEREIGN_LLM_API_KEY", "sk-both")
	t.Setenv("SOVEREIGN_LLM_TEMPERATURE", "warm")
	t.Setenv("SOVEREIGN_AGENT_MAX_RUNS", "many")
	errs = nil
	RegisterFlags(flag.NewFlagSet("agent", flag.ContinueOnError), &errs)
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"SOVEREIGN_LLM_API_KEY or SOVEREIGN_LLM_API_KEY_FILE, not both", `SOVEREIGN_LLM_TEMPERATURE="warm"`, `SOVEREIGN_AGENT_MAX_RUNS="many"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors %q: want %q", joined, want)
		}
	}
	if strings.Contains(joined, "sk-both") {
		t.Error("an error shows the API key")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	temp := 3.0
	bad := Config{Name: "a.b", BaseURL: "ftp://x", Temperature: &temp, MaxIterations: 1001, ContextTokens: 10, MaxRuns: -1}.withDefaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"agent name \"a.b\"", "SOVEREIGN_LLM_BASE_URL", "SOVEREIGN_LLM_TEMPERATURE", "SOVEREIGN_AGENT_MAX_ITERATIONS=1001",
		"SOVEREIGN_LLM_CONTEXT_TOKENS=10", "SOVEREIGN_AGENT_MAX_RUNS=-1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want %q", err, want)
		}
	}
	if err := (Config{}).withDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	base := 3 * time.Minute
	for _, tc := range []struct {
		args string
		want time.Duration
	}{
		{`{}`, base},
		{`{"timeout_ms": 1000}`, base},
		{`{"timeout_ms": 600000}`, 10*time.Minute + 30*time.Second},
		{`{"timeout_ms": "x"}`, base},
		{`{"timeout_ms": -5}`, base},
	} {
		args := map[string]json.RawMessage{}
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		if got := callTimeout(base, args); got != tc.want {
			t.Errorf("callTimeout(%s) = %s; want %s", tc.args, got, tc.want)
		}
	}
}
