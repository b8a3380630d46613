package page

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want rune
		mods []chromedp.Modifier
	}{
		{"Enter", '\r', nil},
		{"enter", '\r', nil},
		{"Return", '\r', nil},
		{"Tab", '\t', nil},
		{"Esc", '\u001b', nil},
		{"Escape", '\u001b', nil},
		{"Backspace", '\b', nil},
		{"ArrowDown", '\u0301', nil},
		{"Down", '\u0301', nil},
		{"PageUp", '\u0308', nil},
		{"F5", '\u0805', nil},
		{"Space", ' ', nil},
		{"a", 'a', nil},
		{"+", '+', nil},
		{"é", 'é', nil},
		{"Control+a", 'a', []chromedp.Modifier{chromedp.ModifierCtrl}},
		{"Shift+Tab", '\t', []chromedp.Modifier{chromedp.ModifierShift}},
		{"Ctrl+Shift+ArrowLeft", '\u0302', []chromedp.Modifier{chromedp.ModifierCtrl, chromedp.ModifierShift}},
		{"Control++", '+', []chromedp.Modifier{chromedp.ModifierCtrl}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, mods, err := parseKey(tt.in)
			if err != nil {
				t.Fatalf("parseKey(%q): %v", tt.in, err)
			}
			if r != tt.want || len(mods) != len(tt.mods) {
				t.Fatalf("parseKey(%q) = %q %v, want %q %v", tt.in, r, mods, tt.want, tt.mods)
			}
			for i := range mods {
				if mods[i] != tt.mods[i] {
					t.Errorf("parseKey(%q) modifiers = %v, want %v", tt.in, mods, tt.mods)
				}
			}
		})
	}
	for _, bad := range []string{"", "Enterr", "Hyperdrive+a", "ab"} {
		t.Run("bad_"+bad, func(t *testing.T) {
			_, _, err := parseKey(bad)
			wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT)
		})
	}
}

func TestPress(t *testing.T) {
	t.Parallel()
	tab := newTab(t, Options{})
	srv := serve(t, map[string]string{
		"/": `<title>Keys</title>
			<script>window.keys = []; addEventListener('keydown', e => keys.push(e.key));</script>
			<form action="/sent"><input id=q name=q aria-label="Query" value="abc"></form>
			<input id=second aria-label="Second">`,
		"/sent": `<title>Sent</title>`,
	})
	must(t, tab, openReq(srv.URL))
	must(t, tab, focusReq(sel("#q")))
	tests := []struct {
		key, check, want string
	}{
		{"End", `document.getElementById('q').selectionStart`, `3`},
		{"Backspace", `document.getElementById('q').value`, `"ab"`},
		{"x", `document.getElementById('q').value`, `"abx"`},
		{"Escape", `keys.at(-1)`, `"Escape"`},
		{"ArrowDown", `keys.at(-1)`, `"ArrowDown"`},
		{"Tab", `document.activeElement.id`, `"second"`},
		{"Shift+Tab", `document.activeElement.id`, `"q"`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := text(must(t, tab, pressReq(tt.key))); got != "Pressed "+tt.key {
				t.Errorf("press = %q", got)
			}
			if got := evalString(t, tab, tt.check); got != tt.want {
				t.Errorf("after %s, %s = %s, want %s", tt.key, tt.check, got, tt.want)
			}
		})
	}
	t.Run("Enter_submits", func(t *testing.T) {
		res := must(t, tab, pressReq("Enter"))
		if got := text(res); !strings.Contains(got, "navigated to "+srv.URL+"/sent?q=abx") {
			t.Errorf("press Enter = %q, want the form submitted", got)
		}
		if got := text(must(t, tab, getTitleReq)); got != "Sent" {
			t.Errorf("title after Enter = %q", got)
		}
	})
	t.Run("unknown_key", func(t *testing.T) {
		_, err := call(t, tab, pressReq("Hyperdrive"))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, `unknown key "Hyperdrive"`, "Enter, Tab, Escape")
	})
	t.Run("no_key", func(t *testing.T) {
		_, err := call(t, tab, pressReq(""))
		wantErr(t, err, commonv1.ErrorCode_INVALID_ARGUMENT, "press needs key")
	})
}
