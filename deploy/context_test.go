package deploy

import (
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildContextResolves copies the repository as `docker build` sends
// it (.dockerignore applied with BuildKit's pattern matcher) and has the go
// command resolve, in that copy, every package and embedded file of the
// binary the images build: the build stage's `go build` would find them
// all. It does not compile (the images' build does); resolving is what a
// .dockerignore can break.
func TestBuildContextResolves(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the build context and runs go list")
	}
	pm := dockerignore(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if excluded {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		files++
		return copyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{".git", "bin", ".sovereign", "deploy/secrets"} {
		if _, err := os.Stat(filepath.Join(dst, gone)); err == nil {
			t.Errorf("%s is in the build context", gone)
		}
	}

	// As the build stage: workspace mode from the context root, no cgo,
	// go.sum files as they are.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .EmbedFiles}}", "./services/sovereign/cmd/sovereign")
	cmd.Dir = dst
	cmd.Env = append(cleanGoEnv(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK="+filepath.Join(dst, "go.work"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in the build context (%d files): %v\n%s", files, err, out)
	}
	embeds := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "github.com/sovereign-fleet/sovereign/") && !strings.HasSuffix(line, " 0") {
			embeds++
		}
	}
	if embeds == 0 {
		t.Errorf("no package of the binary embeds files; go list said:\n%s", out)
	}
}

// cleanGoEnv is the environment without variables that would change how
// the go command resolves the workspace.
func cleanGoEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOWORK", "GOFLAGS", "CGO_ENABLED", "GOOS", "GOARCH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
