package charts

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/sovereign-fleet/sovereign/services/agent"
)

// TestAgentConfig gives the environment the chart renders for the agent
// container to the agent's own flag parsing and validation, as
// `sovereign agent` does at start: every setting arrives under the name the
// agent reads, with the value the chart's values say, and passes its
// checks. Secret references get a stand-in value, the pod name a pod's.
func TestAgentConfig(t *testing.T) {
	const (
		podName = "sov-sovereign-agent-5d8f9c7b6-x2x9k"
		apiKey  = "sk-from-the-secret"
	)
	temp := func(v float64) *float64 { return &v }
	tests := []struct {
		name      string
		overrides map[string]any
		want      agent.Config
	}{
		{name: "defaults", want: agent.Config{
			MaxIterations: 100, MaxRuns: 8, LLMTimeout: 2 * time.Minute, ToolTimeout: 3 * time.Minute, ContextTokens: 32000,
		}},
		{name: "provider", overrides: map[string]any{
			"secrets": map[string]any{"llmApiKey": testLLMKey},
			"agent": map[string]any{
				"maxRuns": 20, "maxIterations": 250, "toolTimeout": "90s",
				"llm": map[string]any{
					"baseURL": "http://ollama.ollama:11434/v1", "model": "qwen3:8b", "systemPrompt": "Be brief.\nUse the browser.",
					"temperature": 0, "timeout": "5m", "contextTokens": 1000000, "stream": false,
				},
			},
		}, want: agent.Config{
			BaseURL: "http://ollama.ollama:11434/v1", Model: "qwen3:8b", SystemPrompt: "Be brief.\nUse the browser.", Temperature: temp(0),
			APIKey: apiKey, MaxIterations: 250, MaxRuns: 20, LLMTimeout: 5 * time.Minute, ToolTimeout: 90 * time.Second,
			ContextTokens: 1000000, NoStream: true,
		}},
		{name: "temperature-string", overrides: map[string]any{"agent": map[string]any{"llm": map[string]any{
			"temperature": "1.5", "existingSecret": "openai",
		}}}, want: agent.Config{
			Temperature: temp(1.5), APIKey: apiKey,
			MaxIterations: 100, MaxRuns: 8, LLMTimeout: 2 * time.Minute, ToolTimeout: 3 * time.Minute, ContextTokens: 32000,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, readValues(t, "", tt.overrides))
			c := container(t, find[*appsv1.Deployment](t, m, fullname+"-agent"))
			// Only what the pod sets: nothing of this process's own.
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SOVEREIGN_") {
					t.Setenv(k, "")
					os.Unsetenv(k)
				}
			}
			for k, v := range m.env(t, c) {
				switch {
				case strings.HasPrefix(v, "secret:"):
					v = apiKey
				case v == "field:metadata.name":
					v = podName
				}
				t.Setenv(k, v)
			}
			var errs []error
			fs := flag.NewFlagSet("agent", flag.ContinueOnError)
			cfg := agent.RegisterFlags(fs, &errs)
			agent.RegisterStandaloneFlags(fs, cfg)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			if len(errs) > 0 {
				t.Fatalf("the agent refuses the rendered environment: %v", errs)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the agent refuses the rendered settings: %v", err)
			}
			// The settings the chart sets, compared field by field.
			want := tt.want
			want.Name, want.Listen = podName, "0.0.0.0:8094"
			type settings struct {
				Name, Listen, BaseURL, Model, SystemPrompt, Temperature string
				APIKeySet                                               bool
				MaxIterations, MaxRuns, ContextTokens                   int
				LLMTimeout, ToolTimeout                                 time.Duration
				NoStream                                                bool
			}
			of := func(c agent.Config) settings {
				s := settings{
					Name: c.Name, Listen: c.Listen, BaseURL: c.BaseURL, Model: c.Model, SystemPrompt: c.SystemPrompt,
					Temperature: "unset", APIKeySet: c.APIKey != "", MaxIterations: c.MaxIterations, MaxRuns: c.MaxRuns,
					ContextTokens: c.ContextTokens, LLMTimeout: c.LLMTimeout, ToolTimeout: c.ToolTimeout, NoStream: c.NoStream,
				}
				if c.Temperature != nil {
					s.Temperature = strconv.FormatFloat(*c.Temperature, 'g', -1, 64)
				}
				return s
			}
			if got, want := of(*cfg), of(want); got != want {
				t.Errorf("agent config\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
