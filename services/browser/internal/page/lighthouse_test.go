package page

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSummarizeLighthouse: the text of lighthouse_audit lists each
// category's score and its failed audits with their first items, and
// stays within LighthouseChars with a marker when the failures do not fit.
func TestSummarizeLighthouse(t *testing.T) {
	node := func(sel, snippet string) map[string]any {
		return map[string]any{"node": map[string]any{"type": "node", "selector": sel, "snippet": snippet,
			"explanation": "Fix any of the following:\n  Element does not have an alt attribute\n  aria-label is empty"}}
	}
	lhrOf := func(failed int) *lhr {
		var r lhr
		raw := map[string]any{
			"lighthouseVersion": "12.8.2", "finalDisplayedUrl": "https://example.test/",
			"categories": map[string]any{
				"accessibility":  map[string]any{"title": "Accessibility", "score": 0.42, "auditRefs": []any{}},
				"seo":            map[string]any{"title": "SEO", "score": 1, "auditRefs": []any{map[string]any{"id": "ok"}}},
				"best-practices": map[string]any{"title": "Best Practices", "score": nil, "auditRefs": []any{map[string]any{"id": "errors-in-console"}}},
			},
			"audits": map[string]any{
				"ok": map[string]any{"title": "Fine", "score": 1},
				"errors-in-console": map[string]any{"title": "Browser errors were logged to the console", "score": 0,
					"details": map[string]any{"items": []any{map[string]any{"source": "network", "description": "Failed to load resource: 404", "sourceLocation": map[string]any{"url": "https://example.test/x.js"}}}}},
			},
		}
		cats := raw["categories"].(map[string]any)
		audits := raw["audits"].(map[string]any)
		a11y := cats["accessibility"].(map[string]any)
		for i := range failed {
			id := fmt.Sprintf("audit-%03d", i)
			a11y["auditRefs"] = append(a11y["auditRefs"].([]any), map[string]any{"id": id})
			var items []any
			for j := range 5 {
				items = append(items, node(fmt.Sprintf("body > img:nth-child(%d)", j), fmt.Sprintf(`<img src="/%d.png">`, j)))
			}
			audits[id] = map[string]any{"title": "Image elements do not have [alt] attributes", "score": 0, "details": map[string]any{"items": items}}
		}
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	for _, tc := range []struct {
		name      string
		failed    int
		want      []string
		wantFails int
	}{
		{"few", 2, []string{
			"Lighthouse 12.8.2, snapshot mode, desktop, of https://example.test/ in 2.0 s: Accessibility 42, Best Practices n/a, SEO 100 (0-100).",
			"- audit-000: Image elements do not have [alt] attributes\n    body > img:nth-child(0)  <img src=\"/0.png\"> — Element does not have an alt attribute",
			"    (… and 2 more)",
			"- errors-in-console: Browser errors were logged to the console\n    Failed to load resource: 404",
		}, 3},
		{"many", 200, []string{"more failed audits cut at 8000 characters: report \"json\" attaches them all"}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, scores, failed := summarizeLighthouse(lhrOf(tc.failed), "snapshot", "desktop", 2*time.Second)
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
			if len(text) > LighthouseChars {
				t.Errorf("text is %d characters, more than %d", len(text), LighthouseChars)
			}
			if scores["accessibility"] != 42 || scores["seo"] != 100 || scores["best-practices"] != -1 {
				t.Errorf("scores = %v", scores)
			}
			if len(failed) != tc.wantFails || failed[0].More != 2 || len(failed[0].Items) != lighthouseItems {
				t.Errorf("failed = %d audits, first %+v", len(failed), failed[0])
			}
		})
	}
}

// TestOneOf: an argument takes its default when empty and names the
// accepted values when wrong (never an empty one).
func TestOneOf(t *testing.T) {
	for _, tc := range []struct {
		v, want, err string
	}{
		{"", "navigation", ""},
		{" Snapshot ", "snapshot", ""},
		{"pdf", "", `report "pdf" is not one of json, html`},
	} {
		allowed := []string{"navigation", "snapshot"}
		name := "mode"
		if tc.err != "" {
			allowed, name = []string{"", "json", "html"}, "report"
		}
		got, err := oneOf(name, tc.v, allowed...)
		if got != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("oneOf(%q, %q) = %q, %v, want %q, %q", name, tc.v, got, err, tc.want, tc.err)
		}
	}
}
