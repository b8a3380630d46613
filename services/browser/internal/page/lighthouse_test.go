package page

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSummarizeLighthouse: the text of lighthouse_audit lists each
// category's score and its failed audits with their first items, and
// stays within LighthouseChars with a marker when the failures do not fit.
func TestSummarizeLighthouse(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestSummarizeLighthouseCap: whatever the failed audits, the warning and
// the mode, the text stays within LighthouseChars (the cut left 200
// characters for what follows it, which can be longer: the cut's marker, a
// 300-character warning, the navigation note).
func TestSummarizeLighthouseCap(t *testing.T) {
	t.Parallel()
	longest := 0
	for pad := 0; pad < 400; pad += 7 {
		raw := map[string]any{
			"lighthouseVersion": "12.8.2", "finalDisplayedUrl": "https://example.test/" + strings.Repeat("p", 400),
			"runWarnings": []any{strings.Repeat("The page loaded too slowly to finish within the time limit. ", 10)},
		}
		refs := []any{}
		audits := map[string]any{}
		for i := range 40 {
			id := fmt.Sprintf("audit-%03d", i)
			refs = append(refs, map[string]any{"id": id})
			items := []any{}
			for j := range 4 {
				items = append(items, map[string]any{"node": map[string]any{"type": "node",
					"selector": strings.Repeat("div > ", 10+pad%20) + fmt.Sprint(j), "snippet": "<div>" + strings.Repeat("x", 50+pad) + "</div>"}})
			}
			audits[id] = map[string]any{"title": strings.Repeat("T", 100+pad%50), "score": 0, "displayValue": strings.Repeat("v", pad%120), "details": map[string]any{"items": items}}
		}
		raw["categories"] = map[string]any{"accessibility": map[string]any{"title": "Accessibility", "score": 0.1, "auditRefs": refs}}
		raw["audits"] = audits
		b, _ := json.Marshal(raw)
		var r lhr
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		text, _, _ := summarizeLighthouse(&r, "navigation", "mobile", time.Second)
		longest = max(longest, len([]rune(text)))
	}
	if longest > LighthouseChars {
		t.Errorf("the text reaches %d characters, more than LighthouseChars (%d)", longest, LighthouseChars)
	}
}

// TestLighthouseRunnerEnv: the runner (Node.js and the npm packages of
// Lighthouse) does not get the worker's environment, which holds the
// operator's secret key.
func TestLighthouseRunnerEnv(t *testing.T) {
	t.Setenv("SOVEREIGN_SECRET_KEY", "c2VjcmV0LWtleS1vZi10aGUtb3BlcmF0b3ItMzJieXRlcw==")
	dir := t.TempDir()
	run := filepath.Join(dir, "run.sh")
	script := "cat >/dev/null; printf '{\"lhr\": {\"env\": \"%s\"}}' \"$(env | tr '\\n\"' '  ')\"\n"
	if err := os.WriteFile(run, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := runLighthouse(ctx, "/bin/sh", run, lighthouseRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if env := string(out.LHR); strings.Contains(env, "SOVEREIGN_SECRET_KEY") || !strings.Contains(env, "PATH=") {
		t.Errorf("the runner's environment: %s; want PATH and no SOVEREIGN_SECRET_KEY", env)
	}
}
