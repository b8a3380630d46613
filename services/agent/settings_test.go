package agent

import (
	"context"
	"strings"
	"testing"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/agent/llmtest"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

func (e *env) settings() *agentv1.Settings {
	e.t.Helper()
	var s agentv1.Settings
	if err := e.c.Request(context.Background(), e.c.Subject("agent", "settings", "get"), &agentv1.GetSettingsRequest{}, &s); err != nil {
		e.t.Fatalf("settings.get: %v", err)
	}
	return &s
}

func (e *env) putSettings(req *agentv1.PutSettingsRequest) (*agentv1.Settings, error) {
	var s agentv1.Settings
	err := e.c.Request(context.Background(), e.c.Subject("agent", "settings", "put"), req, &s)
	return &s, err
}

func TestSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, llmtest.Reply("one"), llmtest.Reply("two"), llmtest.Reply("three"))
	key, err := secrets.ParseKey(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.APIKey = "sk-env-0123456789wxyz"
	cfg.SecretKey = key
	a := e.agent(cfg)

	s := e.settings()
	if s.GetSource() != "environment" || s.GetBaseUrl() != e.llm.URL || s.GetModel() != "test-model" || !s.GetApiKeySet() ||
		s.GetApiKeyHint() != "sk-…wxyz" || s.GetApiKey() != "" || s.GetMaxIterations() != DefaultMaxIterations || s.GetHasTemperature() {
		t.Fatalf("environment settings = %v", s)
	}

	// Saved from the console: the key sealed, never returned.
	const apiKey = "sk-console-abcdefghijklmnopqrstuv9876"
	s, err = e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{
		ApiKey: apiKey, Model: "console-model", SystemPrompt: "Be brief.", MaxIterations: 7, Temperature: 0.5, HasTemperature: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetSource() != "console" || s.GetApiKey() != "" || !s.GetApiKeySet() || s.GetApiKeyHint() != "sk-…9876" || s.GetModel() != "console-model" ||
		s.GetBaseUrl() != e.llm.URL || s.GetMaxIterations() != 7 || s.GetTemperature() != 0.5 || !s.GetHasTemperature() || s.GetUpdatedUnixMilli() == 0 {
		t.Fatalf("saved settings = %v", s)
	}
	if got := e.settings(); got.GetApiKeyHint() != "sk-…9876" || got.GetSource() != "console" || got.GetApiKey() != "" {
		t.Errorf("settings.get after put = %v", got)
	}
	raw, err := a.kv.Get(context.Background(), keySettings)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw.Value()), apiKey) || strings.Contains(string(raw.Value()), "abcdefghijklmnop") {
		t.Fatalf("the stored settings hold the API key in clear: %s", raw.Value())
	}

	// A run uses them.
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	req := e.llm.Requests()[0]
	if run.GetMaxIterations() != 7 || req.Authorization != "Bearer "+apiKey || req.Model != "console-model" ||
		req.Temperature == nil || *req.Temperature != 0.5 || req.Messages[0].Content != "Be brief." {
		t.Fatalf("run %v; request auth %q model %q temperature %v system %q", run, req.Authorization, req.Model, req.Temperature, req.Messages[0].Content)
	}

	// A put without a key keeps the stored one; clear_api_key drops it
	// (the environment's key applies again).
	if s, err = e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{Model: "m2"}}); err != nil || s.GetApiKeyHint() != "sk-…9876" || s.GetMaxIterations() != DefaultMaxIterations {
		t.Fatalf("put without a key = %v, %v", s, err)
	}
	e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	if got := e.llm.Requests()[1]; got.Authorization != "Bearer "+apiKey || got.Model != "m2" {
		t.Errorf("second run: auth %q model %q", got.Authorization, got.Model)
	}
	if s, err = e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{Model: "m2"}, ClearApiKey: true}); err != nil || s.GetApiKeyHint() != "sk-…wxyz" {
		t.Fatalf("clear_api_key = %v, %v", s, err)
	}
	e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	if got := e.llm.Requests()[2]; got.Authorization != "Bearer sk-env-0123456789wxyz" {
		t.Errorf("third run: auth %q, want the environment's key", got.Authorization)
	}

	// Bad settings are refused, naming the field.
	for _, tc := range []struct {
		s    *agentv1.Settings
		want string
	}{
		{&agentv1.Settings{BaseUrl: "ftp://example.com/v1"}, "base_url"},
		{&agentv1.Settings{BaseUrl: "localhost:11434"}, "absolute http(s) URL"},
		{&agentv1.Settings{BaseUrl: "https://user:pw@example.com/v1"}, "credentials"},
		{&agentv1.Settings{MaxIterations: 1001}, "max_iterations 1001: must be 1 to 1000"},
		{&agentv1.Settings{MaxIterations: -1}, "max_iterations -1"},
		{&agentv1.Settings{Temperature: 2.5, HasTemperature: true}, "temperature 2.5: must be 0 to 2"},
		{&agentv1.Settings{Temperature: -0.1, HasTemperature: true}, "temperature"},
		{&agentv1.Settings{ApiKey: "has a space"}, "api_key"},
		{&agentv1.Settings{Model: "a\nb"}, "model"},
		{&agentv1.Settings{ApiKey: strings.Repeat("k", maxAPIKey+1)}, "api_key: at most 4096 characters"},
		{&agentv1.Settings{SystemPrompt: strings.Repeat("p", maxSystemPrompt+1)}, "system_prompt: 32769 characters; at most 32768"},
	} {
		if _, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: tc.s}); !bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put %v: %v, want INVALID_ARGUMENT with %q", tc.s, err, tc.want)
		}
	}
	if _, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{ApiKey: "sk-x"}, ClearApiKey: true}); !bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) {
		t.Errorf("api_key and clear_api_key: %v", err)
	}
	if got := e.settings(); got.GetModel() != "m2" {
		t.Errorf("a refused put changed the settings: %v", got)
	}
}

func TestSettingsWithoutSecretKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.agent(e.config())
	_, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{ApiKey: "sk-abcdefghijklmnop"}})
	if !bus.Is(err, commonv1.ErrorCode_INVALID_ARGUMENT) || !strings.Contains(err.Error(), "set SOVEREIGN_SECRET_KEY to store the API key") ||
		strings.Contains(err.Error(), "abcdefghijklmnop") {
		t.Fatalf("put with a key and no secret key: %v", err)
	}
	// Everything else can still be saved.
	s, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{BaseUrl: "http://127.0.0.1:11434/v1", Model: "qwen3:8b"}})
	if err != nil || s.GetBaseUrl() != "http://127.0.0.1:11434/v1" || s.GetApiKeySet() {
		t.Fatalf("put without a key = %v, %v", s, err)
	}
}

// A key sealed with another secret key ends runs with an error that says
// what to do, and never the key.
func TestSettingsWrongSecretKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k1, _ := secrets.ParseKey(strings.Repeat("01", 32))
	k2, _ := secrets.ParseKey(strings.Repeat("02", 32))
	cfg := e.config()
	cfg.SecretKey = k1
	a := e.agent(cfg)
	if _, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{ApiKey: "sk-sealed-with-k1-0000"}}); err != nil {
		t.Fatal(err)
	}
	_ = a.Close(context.Background())
	cfg.SecretKey = k2
	e.agent(cfg)
	run := e.wait(e.start(&agentv1.StartRunRequest{Message: "hi"}).GetId())
	if run.GetState() != agentv1.RunState_RUN_STATE_ERROR || !strings.Contains(run.GetError(), "sealed with another secret key") ||
		strings.Contains(run.GetError(), "sk-sealed") {
		t.Fatalf("run = %v", run)
	}
	if len(e.llm.Requests()) != 0 {
		t.Error("the model was called without a usable key")
	}
}

func TestKeyHint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                        "",
		"ab":                      "…",
		"abc":                     "…bc",
		"123456789012":            "…12",
		"sk-proj-1234567890a1b2":  "sk-…a1b2",
		"sk-0123456789ab":         "sk-…89ab",
		"ключ-0123456789-последн": "клю…ледн",
	} {
		if got := KeyHint(in); got != want {
			t.Errorf("KeyHint(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSettingsDefaultsNotFrozen: the console's form shows the values in
// force; saving them unchanged stores nothing of them, so a later change
// of the environment (or of the built-in prompt) still applies.
func TestSettingsDefaultsNotFrozen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent(e.config())
	shown := e.settings()
	if _, err := e.putSettings(&agentv1.PutSettingsRequest{Settings: &agentv1.Settings{
		BaseUrl: shown.GetBaseUrl(), Model: "other-model", SystemPrompt: shown.GetSystemPrompt(), MaxIterations: shown.GetMaxIterations(),
	}}); err != nil {
		t.Fatal(err)
	}
	sv, _, err := a.loadSaved(context.Background())
	if err != nil || sv == nil {
		t.Fatalf("saved = %v, %v", sv, err)
	}
	if sv.BaseURL != "" || sv.SystemPrompt != "" || sv.MaxIterations != 0 || sv.Model != "other-model" {
		t.Fatalf("saved %+v; want only the model, the rest left to the environment", sv)
	}
}

// TestStoppedRunNotedInChat: a cancelled or failed run leaves a note in
// its chat, so the conversation does not end in an unanswered message.
func TestStoppedRunNotedInChat(t *testing.T) {
	t.Parallel()
	gate := llmtest.NewGate()
	defer gate.Release()
	e := newEnv(t, llmtest.Step{Block: gate, Text: "late"}, llmtest.Fail(404, "no such model"))
	e.agent(e.config())
	run := e.start(&agentv1.StartRunRequest{Message: "wait"})
	<-gate.Entered()
	e.cancel(run.GetId(), "tester")
	done := e.wait(run.GetId())
	msgs := e.hist.messages(done.GetChatId())
	if last := msgs[len(msgs)-1]; last.GetRole() != "assistant" || last.GetContent() != "[stopped: cancelled by tester]" {
		t.Fatalf("last chat message after a cancel = %v", last)
	}
	failed := e.wait(e.start(&agentv1.StartRunRequest{ChatId: done.GetChatId(), Message: "again"}).GetId())
	msgs = e.hist.messages(done.GetChatId())
	if last := msgs[len(msgs)-1]; last.GetRole() != "assistant" || !strings.HasPrefix(last.GetContent(), "[the run failed: ") || failed.GetState() != agentv1.RunState_RUN_STATE_ERROR {
		t.Fatalf("last chat message after a failure = %v (run %v)", last, failed)
	}
}
