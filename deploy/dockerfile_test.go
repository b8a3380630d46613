package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repoRoot is the build context of every image (tests run in deploy/).
const repoRoot = ".."

// image is what one Dockerfile promises.
type image struct {
	service    string
	base       string   // the final stage's FROM
	user       string   // the final stage's USER
	entrypoint []string // exec form
	expose     []string
	env        map[string]string // container defaults that must be set
	packages   []string          // Debian packages the final stage installs
	owned      []string          // directories copied from the build stage, owned by the runtime user
}

var images = []image{
	{
		service: "gateway", base: "gcr.io/distroless/static-debian12:nonroot", user: "65532:65532",
		entrypoint: []string{"/sovereign", "gateway"}, expose: []string{"8080", "8086"},
		env: map[string]string{"SOVEREIGN_LISTEN": "0.0.0.0:8080", "SOVEREIGN_WORKSPACE": "/data/workspace"},
		// The system tools' workspace: a volume mounted there starts out
		// owned by the runtime user.
		owned: []string{"/data/workspace"},
	},
	{
		service: "agent", base: "gcr.io/distroless/static-debian12:nonroot", user: "65532:65532",
		entrypoint: []string{"/sovereign", "agent"}, expose: []string{"8094"},
		env: map[string]string{"SOVEREIGN_AGENT_LISTEN": "0.0.0.0:8094"},
	},
	{
		service: "history", base: "gcr.io/distroless/static-debian12:nonroot", user: "65532:65532",
		entrypoint: []string{"/sovereign", "history"}, expose: []string{"8092"},
		env:   map[string]string{"SOVEREIGN_HISTORY_LISTEN": "0.0.0.0:8092", "SOVEREIGN_DATA_DIR": "/data"},
		owned: []string{"/data"},
	},
	{
		service: "signer", base: "gcr.io/distroless/static-debian12:nonroot", user: "65532:65532",
		entrypoint: []string{"/sovereign", "signer"}, expose: []string{"8093"},
		env:   map[string]string{"SOVEREIGN_SIGNER_LISTEN": "0.0.0.0:8093", "SOVEREIGN_DATA_DIR": "/data"},
		owned: []string{"/data"},
	},
	{
		service: "browser", base: "debian:bookworm-slim", user: "10001:10001",
		entrypoint: []string{"/usr/bin/tini", "--", "/usr/local/bin/sovereign", "browser"}, expose: []string{"8091"},
		env: map[string]string{
			"SOVEREIGN_BROWSER_LISTEN": "0.0.0.0:8091", "SOVEREIGN_CHROME": "/usr/lib/chromium/chromium-headless-shell",
			"HOME": "/home/sovereign", "TMPDIR": "/tmp", "SOVEREIGN_LIGHTHOUSE_DIR": "/opt/sovereign/lighthouse",
		},
		packages: []string{"chromium", "fonts-liberation", "fonts-noto-cjk", "fonts-noto-color-emoji", "ca-certificates", "tini", "nodejs"},
	},
}

const buildImage = "golang:1.26-bookworm"

// parseDockerfile parses a Dockerfile with BuildKit's parser and
// instructions packages (what `docker build` runs), collecting the warnings
// of the build checks that run while parsing (the others, such as
// SecretsUsedInArgOrEnv, run in dockerfile2llb: TestDockerfiles checks ARG
// and ENV names itself).
func parseDockerfile(t *testing.T, path string) (stages []instructions.Stage, meta []instructions.ArgCommand, warnings []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	for _, w := range res.Warnings {
		warnings = append(warnings, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, _ []parser.Range) {
		warnings = append(warnings, rule+": "+msg)
	}})
	stages, meta, err = instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("instructions of %s: %v", path, err)
	}
	return stages, meta, warnings
}

func dockerfile(service string) string {
	return filepath.Join("docker", service+".Dockerfile")
}

// TestDockerfiles parses each image's Dockerfile and checks what it promises:
// a golang build stage that builds the sovereign binary without cgo, the
// final base image, a numeric non-root USER, OCI labels with version and
// revision from build args, the ports, the container defaults, the exec-form
// entrypoint, and no secret in an ARG or ENV.
func TestDockerfiles(t *testing.T) {
	for _, im := range images {
		t.Run(im.service, func(t *testing.T) {
			stages, meta, warnings := parseDockerfile(t, dockerfile(im.service))
			// A syntax directive makes every build fetch that frontend
			// image from a registry first (docker.io/docker/dockerfile);
			// the engine's built-in frontend has what these files use
			// (RUN --mount=type=cache).
			if raw, err := os.ReadFile(dockerfile(im.service)); err != nil {
				t.Fatal(err)
			} else if ref, _, _, ok := parser.DetectSyntax(raw); ok {
				t.Errorf("syntax directive %q: builds would pull it from a registry", ref)
			}
			if len(warnings) > 0 {
				t.Errorf("BuildKit warnings:\n  %s", strings.Join(warnings, "\n  "))
			}
			if len(meta) > 0 {
				t.Errorf("ARGs before the first FROM (base images must be pinned in the file): %v", meta)
			}
			if len(stages) != 2 {
				t.Fatalf("%d stages, want 2 (build, final)", len(stages))
			}
			build, final := stages[0], stages[1]
			if build.Name != "build" || build.BaseName != buildImage {
				t.Errorf("build stage = %q FROM %q, want \"build\" FROM %q", build.Name, build.BaseName, buildImage)
			}
			buildRuns := strings.Join(runCommands(build), "\n")
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X github.com/sovereign-fleet/sovereign/services/sovereign.Version=${VERSION}"`, "-o /out/sovereign ./services/sovereign/cmd/sovereign"} {
				if !strings.Contains(buildRuns, want) {
					t.Errorf("build stage does not run %q", want)
				}
			}
			if final.BaseName != im.base {
				t.Errorf("final stage FROM %q, want %q", final.BaseName, im.base)
			}

			// Words are expanded as BuildKit does, with the build args
			// `make images` passes.
			lex := shell.NewLex('\\')
			buildArgs := shell.EnvsFromSlice([]string{"VERSION=1.2.3", "COMMIT=0123abc"})
			expand := func(w string) string {
				v, _, err := lex.ProcessWord(w, buildArgs)
				if err != nil {
					t.Errorf("expand %q: %v", w, err)
				}
				return v
			}
			var (
				user       string
				labels     = map[string]string{}
				env        = map[string]string{}
				args       []string
				expose     []string
				entrypoint *instructions.EntrypointCommand
				owned      []string
			)
			for _, c := range final.Commands {
				switch c := c.(type) {
				case *instructions.UserCommand:
					user = c.User
				case *instructions.LabelCommand:
					for _, kv := range c.Labels {
						labels[expand(kv.Key)] = expand(kv.Value)
					}
				case *instructions.EnvCommand:
					for _, kv := range c.Env {
						env[kv.Key] = expand(kv.Value)
					}
				case *instructions.ArgCommand:
					for _, a := range c.Args {
						args = append(args, a.Key)
					}
				case *instructions.ExposeCommand:
					expose = append(expose, c.Ports...)
				case *instructions.EntrypointCommand:
					entrypoint = c
				case *instructions.CopyCommand:
					if c.From != "" && c.From != "build" {
						t.Errorf("COPY --from=%s: only the build stage is copied from", c.From)
					}
					if c.From == "build" {
						if c.Chown == im.user {
							owned = append(owned, c.DestPath)
						}
						for _, src := range c.SourcePaths {
							if !strings.Contains(buildRuns, src) {
								t.Errorf("COPY --from=build %s: no RUN of the build stage makes it", src)
							}
						}
					}
				}
			}
			if !slices.Equal(owned, im.owned) {
				t.Errorf("copied with --chown=%s: %v, want %v", im.user, owned, im.owned)
			}
			if len(im.packages) > 0 {
				install := strings.Join(runCommands(final), "\n")
				for _, p := range append(im.packages, "apt-get install -y --no-install-recommends", "rm -rf /var/lib/apt/lists/*") {
					if !strings.Contains(install, p) {
						t.Errorf("the final stage does not install %q", p)
					}
				}
				if uid, gid, _ := strings.Cut(im.user, ":"); !strings.Contains(install, "useradd --uid "+uid+" --gid "+gid) {
					t.Errorf("no user %s is created", im.user)
				}
			}
			if user != im.user {
				t.Errorf("USER = %q, want %q (numeric, so Kubernetes' runAsNonRoot can check it)", user, im.user)
			}
			if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
				t.Errorf("USER %q is root", user)
			}
			if entrypoint == nil || entrypoint.PrependShell || !slices.Equal(entrypoint.CmdLine, im.entrypoint) {
				t.Errorf("ENTRYPOINT = %+v, want exec form %q", entrypoint, im.entrypoint)
			}
			slices.Sort(expose)
			if !slices.Equal(expose, im.expose) {
				t.Errorf("EXPOSE %v, want %v", expose, im.expose)
			}
			for k, v := range im.env {
				if env[k] != v {
					t.Errorf("ENV %s = %q, want %q", k, env[k], v)
				}
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.title":    "sovereign-" + im.service,
				"org.opencontainers.image.source":   "https://github.com/sovereign-fleet/sovereign",
				"org.opencontainers.image.version":  "1.2.3",
				"org.opencontainers.image.revision": "0123abc",
			}
			for k, v := range wantLabels {
				if labels[k] != v {
					t.Errorf("LABEL %s = %q, want %q", k, labels[k], v)
				}
			}
			if labels["org.opencontainers.image.description"] == "" {
				t.Error("no org.opencontainers.image.description label")
			}
			if !slices.Equal(args, []string{"VERSION", "COMMIT"}) {
				t.Errorf("final stage ARGs = %v, want [VERSION COMMIT]", args)
			}
			secretish := regexp.MustCompile(`(?i)token|secret|passphrase|password|credential|private|_key\b|^key$`)
			for k := range env {
				if secretish.MatchString(k) {
					t.Errorf("ENV %s looks like a secret: secrets never go in an image", k)
				}
			}
			for _, a := range args {
				if secretish.MatchString(a) {
					t.Errorf("ARG %s looks like a secret (build args are kept in the image history)", a)
				}
			}
		})
	}
}

// TestDockerfileCopySources: every COPY from the build context names a path
// that exists in the repository and that .dockerignore leaves in the
// context, so `docker build` finds it.
func TestDockerfileCopySources(t *testing.T) {
	pm := dockerignore(t)
	for _, im := range images {
		stages, _, _ := parseDockerfile(t, dockerfile(im.service))
		n := 0
		for _, st := range stages {
			for _, c := range st.Commands {
				cp, ok := c.(*instructions.CopyCommand)
				if !ok || cp.From != "" {
					continue
				}
				for _, src := range cp.SourcePaths {
					n++
					if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
						t.Errorf("%s: COPY %s: %v", im.service, src, err)
					}
					if src != "." {
						if ex, _ := pm.MatchesOrParentMatches(filepath.Clean(src)); ex {
							t.Errorf("%s: COPY %s: excluded by .dockerignore", im.service, src)
						}
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no COPY from the build context", im.service)
		}
	}
}

// dockerignore reads the repository's .dockerignore with the pattern
// matcher BuildKit uses.
func dockerignore(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

// TestDockerignore: the build context leaves out version control, build
// output, local data dirs, Node packages and the compose project's local
// secrets, and keeps what the build needs.
func TestDockerignore(t *testing.T) {
	pm := dockerignore(t)
	for _, tc := range []struct {
		path     string
		excluded bool
	}{
		{".git", true},
		{".git/HEAD", true},
		{"bin", true},
		{"bin/sovereign", true},
		{".sovereign", true},
		{".sovereign/history.db", true},
		{"services/browser/.sovereign/nats/x", true},
		{"node_modules", true},
		{"e2e/client-ts/node_modules/zod/package.json", true},
		{"deploy/secrets/gateway.env", true},
		{"deploy/secrets/signer.env", true},
		{"deploy/secrets/agent.env", true},
		{"deploy/.env", true},
		{"go.work", false},
		{"go.work.sum", false},
		{"proto/go.mod", false},
		{"services/sovereign/cmd/sovereign/main.go", false},
		{"services/gateway/internal/console/static/app.js", false},
		{"e2e/go.mod", false},
		{"deploy/go.mod", false},
		{"charts/go.mod", false},
	} {
		got, err := pm.MatchesOrParentMatches(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.excluded {
			t.Errorf(".dockerignore excludes %s = %v, want %v", tc.path, got, tc.excluded)
		}
	}
}

// TestDockerignoreNamesExistingFiles: the files .dockerignore's comments
// point to exist.
func TestDockerignoreNamesExistingFiles(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`[\w./-]+_test\.go`).FindAllString(string(raw), -1)
	if len(named) == 0 {
		t.Fatal(".dockerignore names no test that checks it")
	}
	for _, f := range named {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			t.Errorf(".dockerignore refers to %s: %v", f, err)
		}
	}
}

func runCommands(st instructions.Stage) []string {
	var out []string
	for _, c := range st.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			out = append(out, strings.Join(r.CmdLine, " "))
		}
	}
	return out
}

// TestOfflineImagesMatchProject: scripts/docker-offline.sh stands in
// exactly the public images the Dockerfiles build from and .env runs, so a
// host without registry access has every one of them under its name.
func TestOfflineImagesMatchProject(t *testing.T) {
	out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "docker-offline.sh"), "list").Output()
	if err != nil {
		t.Fatalf("docker-offline.sh list: %v", err)
	}
	got := strings.Fields(string(out))
	want := []string{buildImage}
	for _, im := range images {
		want = append(want, im.base)
	}
	dotenv := readEnvFile(t, ".env")
	for _, k := range []string{"NATS_IMAGE", "JAEGER_IMAGE", "POSTGRES_IMAGE"} {
		want = append(want, dotenv[k])
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(sorted(got), want) {
		t.Errorf("docker-offline.sh stands in %v; the project uses %v", sorted(got), want)
	}
}
