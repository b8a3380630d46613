package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Tools the gateway answers itself (catalog.Tool.Local).

// openSecretNames opens the secrets bucket without a key: the gateway can
// list names and never read a value (workers hold the key).
func (g *Gateway) openSecretNames(ctx context.Context) error {
	s, err := secrets.Open(ctx, g.bus.NATS(), g.bus.Prefix(), nil)
	if err != nil {
		return fmt.Errorf("secrets bucket: %w", err)
	}
	g.secretNames = s
	return nil
}

// localHandler is the handler of a local tool.
func (g *Gateway) localHandler(t catalog.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		if _, err := t.Parse(c.Args); err != nil {
			return dispatch.ErrorText(fmt.Sprintf("%s: %v", t.Name, err))
		}
		switch t.Name {
		case "secrets_list":
			return g.secretsList(ctx)
		case "sovereign__list_scripts":
			text, fields := g.ext.ScriptsText()
			return dispatch.Structured(text, fields)
		case "sovereign__reload":
			target, _ := c.Args["target"].(string)
			name, _ := c.Args["name"].(string)
			if target == "" {
				target = "scripts"
			}
			if name != "" && target == "profiles" {
				return dispatch.ErrorText("sovereign__reload: name selects a script; use it with target scripts or all")
			}
			res, err := g.ext.Reload(ctx, target, name)
			if err != nil {
				return dispatch.ErrorText("sovereign__reload: " + err.Error())
			}
			text := fmt.Sprintf("reloaded %s: %d tools served; added %v, removed %v", target, res.Tools, res.Added, res.Removed)
			if target == "profiles" || target == "all" {
				text += "; profiles need no reload: every new browser session fetches its profile's newest version"
			}
			if len(res.Errors) > 0 {
				text += "\nnot loaded:\n- " + strings.Join(res.Errors, "\n- ")
			}
			b, _ := json.Marshal(res)
			var fields map[string]any
			_ = json.Unmarshal(b, &fields)
			return dispatch.Structured(text, fields)
		}
		return dispatch.ErrorText(t.Name + ": internal error: no handler")
	}
}

// secretsList answers secrets_list: names, never values.
func (g *Gateway) secretsList(ctx context.Context) *dispatch.Result {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := g.secretNames.Names(ctx)
	if err != nil {
		g.log.WarnContext(ctx, "list secrets", "err", err)
		return dispatch.ErrorText("secrets_list: the secrets store did not answer: " + err.Error())
	}
	type item struct {
		Name        string    `json:"name"`
		Placeholder string    `json:"placeholder"`
		Updated     time.Time `json:"updated"`
	}
	out := struct {
		Secrets []item `json:"secrets"`
	}{Secrets: []item{}}
	var b strings.Builder
	if len(list) == 0 {
		b.WriteString("No secrets are stored. An operator adds one with: sovereign secret set NAME")
	} else {
		fmt.Fprintf(&b, "%d secrets (use the placeholder in fill/type values and URLs):", len(list))
	}
	for _, s := range list {
		p := secrets.Placeholder(s.Name)
		out.Secrets = append(out.Secrets, item{Name: s.Name, Placeholder: p, Updated: s.Updated})
		fmt.Fprintf(&b, "\n- %s", p)
	}
	return dispatch.Structured(b.String(), out)
}
