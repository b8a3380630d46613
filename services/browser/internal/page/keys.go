package page

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// keyNames maps lower-case key names (Enter, ArrowDown, F5, ...) to the
// rune that package kb encodes as that key.
var keyNames = buildKeyNames()

// keyAliases are other names that models use for keys.
var keyAliases = map[string]string{
	"esc": "escape", "return": "enter", "del": "delete", "ins": "insert",
	"up": "arrowup", "down": "arrowdown", "left": "arrowleft", "right": "arrowright",
	"pgup": "pageup", "pgdn": "pagedown", "bksp": "backspace",
}

// modifierNames maps lower-case modifier names to modifiers.
var modifierNames = map[string]chromedp.Modifier{
	"control": chromedp.ModifierCtrl,
	"ctrl":    chromedp.ModifierCtrl,
	"shift":   chromedp.ModifierShift,
	"alt":     chromedp.ModifierAlt,
	"option":  chromedp.ModifierAlt,
	"meta":    chromedp.ModifierMeta,
	"cmd":     chromedp.ModifierMeta,
	"command": chromedp.ModifierMeta,
	"super":   chromedp.ModifierMeta,
}

func buildKeyNames() map[string]rune {
	m := map[string]rune{"space": ' ', "spacebar": ' '}
	for r, k := range kb.Keys {
		if utf8.RuneCountInString(k.Key) < 2 {
			continue // a printable character; it names itself
		}
		name := strings.ToLower(k.Key)
		if old, ok := m[name]; !ok || r < old {
			m[name] = r
		}
	}
	return m
}

// parseKey parses a key such as "Enter", "a" or "Control+Shift+ArrowLeft"
// into the rune of the key and its modifiers.
func parseKey(s string) (rune, []chromedp.Modifier, error) {
	bad := func() (rune, []chromedp.Modifier, error) {
		return 0, nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"unknown key %q; use a key name such as Enter, Tab, Escape, ArrowDown, Backspace or a single character, with optional modifiers such as Control+a or Shift+Tab", s)
	}
	if s == "" {
		return 0, nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "press needs key, such as Enter, Tab or Escape")
	}
	parts := []string{s}
	if len(s) > 1 {
		parts = strings.Split(s, "+")
		if strings.HasSuffix(s, "++") {
			// "Control++" is Control and the + key.
			parts = append(parts[:len(parts)-2], "+")
		}
	}
	var mods []chromedp.Modifier
	for _, p := range parts[:len(parts)-1] {
		m, ok := modifierNames[strings.ToLower(strings.TrimSpace(p))]
		if !ok {
			return bad()
		}
		mods = append(mods, m)
	}
	key := parts[len(parts)-1]
	if key != " " {
		key = strings.TrimSpace(key)
	}
	if utf8.RuneCountInString(key) == 1 {
		r, _ := utf8.DecodeRuneInString(key)
		return r, mods, nil
	}
	name := strings.ToLower(key)
	if a, ok := keyAliases[name]; ok {
		name = a
	}
	r, ok := keyNames[name]
	if !ok {
		return bad()
	}
	return r, mods, nil
}

// press sends one key press (with modifiers, and those held by press
// down) to the focused element, then waits for a navigation that it
// started (Enter in a form).
func (t *Tab) press(ctx context.Context, key string) (*browserv1.ToolResult, error) {
	r, mods, err := parseKey(key)
	if err != nil {
		return nil, err
	}
	if t.pointer.mods != 0 {
		mods = append(mods, chromedp.Modifier(t.pointer.mods))
	}
	w, stop, err := t.watchNav(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	t.call.inputAt = time.Now()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(string(r), chromedp.KeyModifiers(mods...))); err != nil {
		return nil, err
	}
	return t.acted(ctx, w, "Pressed "+key)
}
