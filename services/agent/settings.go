package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// sealName binds the sealed API key to its place (secrets.Key.Seal).
const sealName = "agent.settings.api_key"

// maxSystemPrompt bounds a saved system prompt (characters).
const maxSystemPrompt = 32 << 10

// saved is the value of the "settings" key: what the console saved. Empty
// fields fall back to the environment's defaults.
type saved struct {
	BaseURL        string  `json:"base_url,omitempty"`
	Model          string  `json:"model,omitempty"`
	SystemPrompt   string  `json:"system_prompt,omitempty"`
	MaxIterations  int32   `json:"max_iterations,omitempty"`
	Temperature    float64 `json:"temperature,omitempty"`
	HasTemperature bool    `json:"has_temperature,omitempty"`
	// APIKeySealed is the key sealed with the fleet's secret key
	// (secrets.Key.Seal); APIKeyHint its masked form.
	APIKeySealed []byte `json:"api_key_sealed,omitempty"`
	APIKeyHint   string `json:"api_key_hint,omitempty"`
	UpdatedMilli int64  `json:"updated_unix_milli"`
}

// settings are the effective provider settings of a run.
type settings struct {
	BaseURL       string
	APIKey        string // SECRET
	Model         string
	SystemPrompt  string
	MaxIterations int
	Temperature   *float64
	// keyErr says why a saved API key cannot be used (never the key).
	keyErr error
}

// loadSaved reads the saved settings; nil when nothing was saved.
func (a *Agent) loadSaved(ctx context.Context) (*saved, uint64, error) {
	e, err := a.kv.Get(ctx, keySettings)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the saved settings: %w", err)
	}
	var s saved
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, 0, fmt.Errorf("the saved settings are not valid JSON (%v): save them again from the console", err)
	}
	return &s, e.Revision(), nil
}

// effective overlays the saved settings on the configured defaults; the
// API key is opened only when open is set.
func (a *Agent) effective(sv *saved, open bool) settings {
	c := a.cfg
	s := settings{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, SystemPrompt: c.SystemPrompt,
		MaxIterations: c.MaxIterations, Temperature: c.Temperature}
	if sv == nil {
		return s
	}
	if sv.BaseURL != "" {
		s.BaseURL = sv.BaseURL
	}
	if sv.Model != "" {
		s.Model = sv.Model
	}
	if sv.SystemPrompt != "" {
		s.SystemPrompt = sv.SystemPrompt
	}
	if sv.MaxIterations > 0 {
		s.MaxIterations = int(sv.MaxIterations)
	}
	if sv.HasTemperature {
		t := sv.Temperature
		s.Temperature = &t
	}
	if len(sv.APIKeySealed) > 0 && open {
		key, err := a.cfg.SecretKey.Open(sealName, sv.APIKeySealed)
		switch {
		case errors.Is(err, secrets.ErrNoKey):
			s.keyErr = errors.New("the API key saved in the chat settings cannot be decrypted: this agent has no secret key; set SOVEREIGN_SECRET_KEY to the key it was saved with, or save the API key again")
		case errors.Is(err, secrets.ErrWrongKey):
			s.keyErr = fmt.Errorf("the API key saved in the chat settings was sealed with another secret key than this agent's (%s): set SOVEREIGN_SECRET_KEY to the key it was saved with, or save the API key again", a.cfg.SecretKey.ID())
		case err != nil:
			s.keyErr = errors.New("the API key saved in the chat settings failed its integrity check: save it again")
		default:
			s.APIKey = string(key)
			clear(key)
		}
	}
	return s
}

// KeyHint is the masked form of an API key shown in the console: the first
// 3 and last 4 characters of a key longer than 12 characters ("sk-…a1b2"),
// else "…" and the last 2.
func KeyHint(key string) string {
	r := []rune(key)
	switch {
	case len(r) == 0:
		return ""
	case len(r) > 12:
		return string(r[:3]) + "…" + string(r[len(r)-4:])
	case len(r) > 2:
		return "…" + string(r[len(r)-2:])
	}
	return "…"
}

// getSettings answers sov.agent.settings.get: the effective settings,
// never the API key.
func (a *Agent) getSettings(ctx context.Context, _ *agentv1.GetSettingsRequest) (*agentv1.Settings, error) {
	sv, _, err := a.loadSaved(ctx)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%v", err)
	}
	return a.view(sv), nil
}

// view is the Settings message of the effective settings.
func (a *Agent) view(sv *saved) *agentv1.Settings {
	s := a.effective(sv, false)
	out := &agentv1.Settings{BaseUrl: s.BaseURL, Model: s.Model, SystemPrompt: s.SystemPrompt,
		MaxIterations: int32(s.MaxIterations), Source: "environment"}
	if s.Temperature != nil {
		out.Temperature, out.HasTemperature = *s.Temperature, true
	}
	switch {
	case sv != nil && len(sv.APIKeySealed) > 0:
		out.ApiKeySet, out.ApiKeyHint = true, sv.APIKeyHint
	case a.cfg.APIKey != "":
		out.ApiKeySet, out.ApiKeyHint = true, KeyHint(a.cfg.APIKey)
	}
	if sv != nil {
		out.Source = "console"
		out.UpdatedUnixMilli = sv.UpdatedMilli
	}
	return out
}

// putSettings answers sov.agent.settings.put: it validates and saves the
// settings (fields left empty fall back to the environment's defaults),
// the API key sealed with the fleet's secret key.
func (a *Agent) putSettings(ctx context.Context, r *agentv1.PutSettingsRequest) (*agentv1.Settings, error) {
	in := r.GetSettings()
	if in == nil {
		in = &agentv1.Settings{}
	}
	invalid := func(format string, args ...any) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "settings: "+format, args...)
	}
	ns := saved{
		BaseURL:      strings.TrimSpace(in.GetBaseUrl()),
		Model:        strings.TrimSpace(in.GetModel()),
		SystemPrompt: strings.TrimSpace(in.GetSystemPrompt()),
	}
	// A value equal to the environment's (or the built-in default) is
	// not saved: the form shows the values in force, and saving it must
	// not freeze today's defaults into the console's settings.
	if ns.BaseURL == a.cfg.BaseURL {
		ns.BaseURL = ""
	}
	if ns.Model == a.cfg.Model {
		ns.Model = ""
	}
	if ns.SystemPrompt == strings.TrimSpace(a.cfg.SystemPrompt) {
		ns.SystemPrompt = ""
	}
	if ns.BaseURL != "" {
		if err := checkBaseURL(ns.BaseURL); err != nil {
			return nil, invalid("base_url %v", err)
		}
	}
	if len(ns.Model) > 256 || strings.ContainsAny(ns.Model, "\r\n") {
		return nil, invalid("model: at most 256 characters on one line")
	}
	if utf8.RuneCountInString(ns.SystemPrompt) > maxSystemPrompt {
		return nil, invalid("system_prompt: %d characters; at most %d", utf8.RuneCountInString(ns.SystemPrompt), maxSystemPrompt)
	}
	if m := in.GetMaxIterations(); m != 0 {
		if m < 1 || m > MaxIterationsLimit {
			return nil, invalid("max_iterations %d: must be 1 to %d (0 for the default, %d)", m, MaxIterationsLimit, a.cfg.MaxIterations)
		}
		if int(m) != a.cfg.MaxIterations {
			ns.MaxIterations = m
		}
	}
	if in.GetHasTemperature() {
		if err := checkTemperature(in.GetTemperature()); err != nil {
			return nil, invalid("temperature %v", err)
		}
		ns.Temperature, ns.HasTemperature = in.GetTemperature(), true
	}
	key := strings.TrimSpace(in.GetApiKey())
	if key != "" {
		if r.GetClearApiKey() {
			return nil, invalid("give api_key or clear_api_key, not both")
		}
		if len(key) > maxAPIKey || strings.ContainsAny(key, " \t\r\n") {
			return nil, invalid("api_key: at most %d characters without spaces or line breaks", maxAPIKey)
		}
		if a.cfg.SecretKey == nil {
			return nil, invalid("set SOVEREIGN_SECRET_KEY to store the API key encrypted (make one with `sovereign secret keygen`; `sovereign up` keeps one in its data dir), or give the key to the agent as SOVEREIGN_LLM_API_KEY")
		}
		sealed, err := a.cfg.SecretKey.Seal(sealName, []byte(key))
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "seal the API key: %v", err)
		}
		ns.APIKeySealed, ns.APIKeyHint = sealed, KeyHint(key)
	}

	for attempt := 0; ; attempt++ {
		old, rev, err := a.loadSaved(ctx)
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%v", err)
		}
		if key == "" && !r.GetClearApiKey() && old != nil {
			ns.APIKeySealed, ns.APIKeyHint = old.APIKeySealed, old.APIKeyHint
		}
		ns.UpdatedMilli = time.Now().UnixMilli()
		b, err := json.Marshal(ns)
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode settings: %v", err)
		}
		if old == nil {
			_, err = a.kv.Create(ctx, keySettings, b)
		} else {
			_, err = a.kv.Update(ctx, keySettings, b, rev)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt >= 10 {
			return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "save the settings: %v", err)
		}
	}
	a.log.Info("provider settings saved from the console", "base_url", redactURL(ns.BaseURL), "model", ns.Model,
		"api_key_set", len(ns.APIKeySealed) > 0, "api_key_cleared", r.GetClearApiKey())
	return a.view(&ns), nil
}
