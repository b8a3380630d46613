package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The two documents that tell a user how to run the compose project.
var composeDocs = []string{"README.md", filepath.Join(repoRoot, "docs", "deploy.md")}

// minCompose is the oldest compose plugin that loads compose.yaml: env_file
// entries with `required` came in 2.24.
const minCompose = "2.24"

// composeSteps are the docker compose commands of the docs' first run, in
// order: what e2e/compose_test.go (TestCompose) runs, step for step.
var composeSteps = []string{
	"docker compose build",
	"docker compose up -d nats",
	"docker compose run --rm cli secret keygen",
	"docker compose run --rm cli token create --name laptop",
	"docker compose up -d",
	"docker compose ps",
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestDocsDockerRequirements: both documents name the minimum compose
// version and buildx, and how to check them, and scripts/deps.sh checks the
// same minimum; the compose file does use what needs it.
func TestDocsDockerRequirements(t *testing.T) {
	for _, doc := range composeDocs {
		text := readDoc(t, doc)
		for _, want := range []string{minCompose + " or\nlater", "docker compose version", "docker buildx version", "buildx plugin", "scripts/deps.sh docker"} {
			if !strings.Contains(strings.Join(strings.Fields(text), " "), strings.Join(strings.Fields(want), " ")) {
				t.Errorf("%s does not say %q", doc, want)
			}
		}
	}
	deps := readDoc(t, filepath.Join(repoRoot, "scripts", "deps.sh"))
	if !strings.Contains(deps, "min_compose="+minCompose+" ") {
		t.Errorf("scripts/deps.sh does not check compose %s", minCompose)
	}
	if !regexp.MustCompile(`(?m)^\s+required: false$`).MatchString(readDoc(t, "compose.yaml")) {
		t.Errorf("compose.yaml no longer uses env_file's required: is %s still the minimum?", minCompose)
	}
}

// TestDocsComposeSteps: both documents give the same first run, the one
// TestCompose follows.
func TestDocsComposeSteps(t *testing.T) {
	block := regexp.MustCompile("(?s)```sh\n(cd deploy\n.*?)```")
	for _, doc := range composeDocs {
		m := block.FindStringSubmatch(readDoc(t, doc))
		if m == nil {
			t.Errorf("%s has no sh block starting with cd deploy", doc)
			continue
		}
		var got []string
		for _, l := range strings.Split(m[1], "\n") {
			if cmd, _, _ := strings.Cut(l, "#"); strings.HasPrefix(cmd, "docker compose") {
				got = append(got, strings.TrimSpace(cmd))
			}
		}
		if !slices.Equal(got, composeSteps) {
			t.Errorf("%s runs\n  %s\nwant (as TestCompose)\n  %s", doc, strings.Join(got, "\n  "), strings.Join(composeSteps, "\n  "))
		}
	}
}

// TestDocsChromiumSandbox: one piece of advice for hosts without
// unprivileged user namespaces, in both documents: SOVEREIGN_CHROME_SANDBOX
// =off in .env (which compose passes to the workers:
// TestComposeSettingsReachTheirService), not running the workers as root.
func TestDocsChromiumSandbox(t *testing.T) {
	for _, doc := range composeDocs {
		text := strings.Join(strings.Fields(readDoc(t, doc)), " ")
		if !strings.Contains(text, "SOVEREIGN_CHROME_SANDBOX=off` in `") || !strings.Contains(text, ".env`") {
			t.Errorf("%s does not tell to set SOVEREIGN_CHROME_SANDBOX=off in .env", doc)
		}
		if strings.Contains(text, `user: "0"`) {
			t.Errorf("%s still advises running the workers as root", doc)
		}
	}
}
