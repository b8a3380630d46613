package agent

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Defaults and limits of the configuration.
const (
	DefaultMaxIterations = 100
	// MaxIterationsLimit is the highest cap a setting or a run may ask for.
	MaxIterationsLimit   = 1000
	DefaultLLMTimeout    = 2 * time.Minute
	DefaultToolTimeout   = 3 * time.Minute
	DefaultContextTokens = 32000
	// MinContextTokens is the smallest context budget accepted.
	MinContextTokens = 1000
	DefaultMaxRuns   = 8
	// DefaultLLMRetries is how often a model call is retried on 408, 409,
	// 429, 5xx and connection errors (so at most 4 attempts).
	DefaultLLMRetries = 3
	// DefaultListen is where a standalone agent serves /healthz, /readyz
	// and /metrics.
	DefaultListen = "127.0.0.1:8094"
)

// DefaultSystemPrompt is the system prompt when none is configured.
const DefaultSystemPrompt = `You are Sovereign's browser agent. You carry out the user's task by calling the tools you are given: they drive a real web browser (open pages, read them as accessibility snapshots, click, type) and, when enabled, a workspace on disk. Work step by step: look at the page before you act on it, and check the result of each action. When the task is done, answer with a short summary of what you did and the result, without calling a tool. If the task cannot be done, say why.`

// Config configures the agent service. RegisterFlags fills it from flags
// and SOVEREIGN_* variables; a Config made by hand gets the defaults
// (withDefaults) for zero fields.
type Config struct {
	// Name names this replica ("<name>/<incarnation>" owns its runs);
	// default the host name. Letters, digits, "-" and "_" only.
	Name string
	// Listen serves /healthz, /readyz and /metrics; "" for none.
	Listen string
	// Logger receives the service's records (never a secret); default
	// slog.Default().
	Logger *slog.Logger
	// SecretKey seals the API key saved from the console; nil refuses to
	// store one (the environment's key still works). Serve loads it from
	// SOVEREIGN_SECRET_KEY(_FILE) when nil.
	SecretKey *secrets.Key

	// Provider defaults; the console's saved settings override them.
	BaseURL string
	// APIKey comes only from SOVEREIGN_LLM_API_KEY or the file
	// SOVEREIGN_LLM_API_KEY_FILE names. SECRET.
	APIKey       string
	Model        string
	SystemPrompt string
	// Temperature is nil for the provider's default.
	Temperature   *float64
	MaxIterations int

	// LLMTimeout bounds one model call (retries included); ToolTimeout
	// one tool call on the bus.
	LLMTimeout  time.Duration
	ToolTimeout time.Duration
	// ContextTokens is the model's context budget (tokens estimated as
	// characters / 4); see the package documentation.
	ContextTokens int
	// NoStream asks for whole replies instead of streamed ones.
	NoStream bool
	// MaxRuns bounds the runs this replica works on at once.
	MaxRuns int
	// LLMRetries is how often a model call is retried (default
	// DefaultLLMRetries; negative for none).
	LLMRetries int

	// Timing of the replica heartbeat and the recovery scan (zero: 5 s,
	// 10 s, and 30 s before a silent replica's runs are given up).
	HeartbeatInterval time.Duration
	ScanInterval      time.Duration
	HeartbeatStale    time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.SystemPrompt == "" {
		c.SystemPrompt = DefaultSystemPrompt
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	if c.LLMTimeout == 0 {
		c.LLMTimeout = DefaultLLMTimeout
	}
	if c.ToolTimeout == 0 {
		c.ToolTimeout = DefaultToolTimeout
	}
	if c.ContextTokens == 0 {
		c.ContextTokens = DefaultContextTokens
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.LLMRetries == 0 {
		c.LLMRetries = DefaultLLMRetries
	} else if c.LLMRetries < 0 {
		c.LLMRetries = 0
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = 10 * time.Second
	}
	if c.HeartbeatStale <= 0 {
		c.HeartbeatStale = 30 * time.Second
	}
	return c
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// defaultName is the host name with characters a subject token cannot
// hold replaced by "-".
func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "agent"
	}
	h = regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(h, "-")
	if len(h) > 64 {
		h = h[:64]
	}
	return h
}

// Validate reports every bad value, each naming its setting.
func (c Config) Validate() error {
	var errs []error
	if !namePattern.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("agent name %q (SOVEREIGN_AGENT_NAME): use 1 to 64 letters, digits, - or _", c.Name))
	}
	if c.BaseURL != "" {
		if err := checkBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("SOVEREIGN_LLM_BASE_URL: %w", err))
		}
	}
	if c.Temperature != nil {
		if err := checkTemperature(*c.Temperature); err != nil {
			errs = append(errs, fmt.Errorf("SOVEREIGN_LLM_TEMPERATURE: %w", err))
		}
	}
	if c.MaxIterations < 1 || c.MaxIterations > MaxIterationsLimit {
		errs = append(errs, fmt.Errorf("SOVEREIGN_AGENT_MAX_ITERATIONS=%d: must be 1 to %d", c.MaxIterations, MaxIterationsLimit))
	}
	if c.LLMTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SOVEREIGN_LLM_TIMEOUT=%s: must be positive", c.LLMTimeout))
	}
	if c.ToolTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SOVEREIGN_AGENT_TOOL_TIMEOUT=%s: must be positive", c.ToolTimeout))
	}
	if c.ContextTokens < MinContextTokens {
		errs = append(errs, fmt.Errorf("SOVEREIGN_LLM_CONTEXT_TOKENS=%d: must be at least %d", c.ContextTokens, MinContextTokens))
	}
	if c.MaxRuns < 1 {
		errs = append(errs, fmt.Errorf("SOVEREIGN_AGENT_MAX_RUNS=%d: must be at least 1", c.MaxRuns))
	}
	if len(c.APIKey) > maxAPIKey {
		errs = append(errs, fmt.Errorf("SOVEREIGN_LLM_API_KEY: %d characters; at most %d", len(c.APIKey), maxAPIKey))
	}
	return errors.Join(errs...)
}

// maxAPIKey bounds an API key's length.
const maxAPIKey = 4096

// checkBaseURL accepts an absolute http or https URL.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an absolute http(s) URL such as https://api.openai.com/v1 or http://127.0.0.1:11434/v1", s)
	}
	if u.User != nil {
		return fmt.Errorf("the URL carries credentials: give the API key separately")
	}
	return nil
}

func checkTemperature(t float64) error {
	if t < 0 || t > 2 || t != t {
		return fmt.Errorf("%v: must be 0 to 2", t)
	}
	return nil
}

// RegisterFlags adds the agent's flags to fs, each with its SOVEREIGN_*
// environment fallback, and returns the Config they fill. The API key only
// ever comes from the environment (SOVEREIGN_LLM_API_KEY) or a file
// (SOVEREIGN_LLM_API_KEY_FILE): a flag would show it in the process list.
// The caller sets SecretKey. Problems are appended to errs.
func RegisterFlags(fs *flag.FlagSet, errs *[]error) *Config {
	cfg := &Config{}
	fs.StringVar(&cfg.BaseURL, "llm-base-url", config.Env("SOVEREIGN_LLM_BASE_URL", ""),
		"OpenAI-compatible API base of the agent's model, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1 (Ollama); the console's chat settings override it [SOVEREIGN_LLM_BASE_URL]")
	fs.StringVar(&cfg.Model, "llm-model", config.Env("SOVEREIGN_LLM_MODEL", ""),
		"the agent's model, e.g. gpt-4.1 or qwen3:8b [SOVEREIGN_LLM_MODEL]")
	fs.StringVar(&cfg.SystemPrompt, "llm-system-prompt", config.Env("SOVEREIGN_LLM_SYSTEM_PROMPT", ""),
		"the agent's system prompt; empty for the built-in one [SOVEREIGN_LLM_SYSTEM_PROMPT]")
	temp := config.Env("SOVEREIGN_LLM_TEMPERATURE", "")
	if temp != "" {
		t, err := strconv.ParseFloat(temp, 64)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("SOVEREIGN_LLM_TEMPERATURE=%q is not a number", temp))
		} else {
			cfg.Temperature = &t
		}
	}
	fs.Func("llm-temperature", "sampling temperature 0 to 2; empty for the provider's default [SOVEREIGN_LLM_TEMPERATURE]", func(s string) error {
		if s == "" {
			cfg.Temperature = nil
			return nil
		}
		t, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		cfg.Temperature = &t
		return nil
	})
	fs.IntVar(&cfg.MaxIterations, "agent-max-iterations", config.MustInt(errs, "SOVEREIGN_AGENT_MAX_ITERATIONS", DefaultMaxIterations),
		"model calls a run may make before it stops with a message saying so (1 to 1000) [SOVEREIGN_AGENT_MAX_ITERATIONS]")
	config.DurationVar(fs, &cfg.LLMTimeout, "llm-timeout", config.MustDuration(errs, "SOVEREIGN_LLM_TIMEOUT", DefaultLLMTimeout),
		"bound on one model call, retries included [SOVEREIGN_LLM_TIMEOUT]")
	config.DurationVar(fs, &cfg.ToolTimeout, "agent-tool-timeout", config.MustDuration(errs, "SOVEREIGN_AGENT_TOOL_TIMEOUT", DefaultToolTimeout),
		"bound on one tool call of a run (an approval may wait 90 s of it) [SOVEREIGN_AGENT_TOOL_TIMEOUT]")
	fs.IntVar(&cfg.ContextTokens, "llm-context-tokens", config.MustInt(errs, "SOVEREIGN_LLM_CONTEXT_TOKENS", DefaultContextTokens),
		"the model's context budget in tokens (estimated as characters / 4): older chat history is left out to fit [SOVEREIGN_LLM_CONTEXT_TOKENS]")
	fs.Var(invertedBool{&cfg.NoStream}, "llm-stream", "stream the model's replies (false: ask for whole replies) [SOVEREIGN_LLM_STREAM]")
	cfg.NoStream = !config.MustBool(errs, "SOVEREIGN_LLM_STREAM", true)
	fs.IntVar(&cfg.MaxRuns, "agent-max-runs", config.MustInt(errs, "SOVEREIGN_AGENT_MAX_RUNS", DefaultMaxRuns),
		"runs one agent replica works on at once; a start beyond it is refused [SOVEREIGN_AGENT_MAX_RUNS]")
	fs.StringVar(&cfg.Name, "agent-name", config.Env("SOVEREIGN_AGENT_NAME", defaultName()),
		"this agent replica's name (letters, digits, - and _); default the host name [SOVEREIGN_AGENT_NAME]")
	key, err := apiKey(os.Getenv)
	if err != nil {
		*errs = append(*errs, err)
	}
	cfg.APIKey = key
	return cfg
}

// RegisterStandaloneFlags adds the flags of an agent running as its own
// process (`sovereign agent`): --listen.
func RegisterStandaloneFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Listen, "listen", config.Env("SOVEREIGN_AGENT_LISTEN", DefaultListen),
		"host:port for /healthz, /readyz and /metrics; empty for none [SOVEREIGN_AGENT_LISTEN]")
}

// invertedBool is a bool flag that sets the negation of its value.
type invertedBool struct{ p *bool }

func (v invertedBool) String() string {
	if v.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*v.p)
}

func (v invertedBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not true or false")
	}
	*v.p = !b
	return nil
}

func (v invertedBool) IsBoolFlag() bool { return true }

// apiKey reads SOVEREIGN_LLM_API_KEY, or the file
// SOVEREIGN_LLM_API_KEY_FILE names (its trailing newline dropped).
func apiKey(getenv func(string) string) (string, error) {
	v, file := getenv("SOVEREIGN_LLM_API_KEY"), getenv("SOVEREIGN_LLM_API_KEY_FILE")
	switch {
	case v != "" && file != "":
		return "", fmt.Errorf("set SOVEREIGN_LLM_API_KEY or SOVEREIGN_LLM_API_KEY_FILE, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("SOVEREIGN_LLM_API_KEY_FILE: %w", err)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("SOVEREIGN_LLM_API_KEY_FILE %s is empty", file)
		}
	}
	return strings.TrimSpace(v), nil
}
