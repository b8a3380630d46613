package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// absent are the commands scripts/deps.sh and scripts/docker-offline.sh
// install on a new machine: the fresh PATH of TestInstallStepsWithToolsAbsent
// holds none of them.
var absent = []string{
	"debootstrap", "chromium", "chromium-browser", "chromium-headless-shell", "google-chrome",
	"protoc", "initdb", "pg_ctl", "postgres", "docker", "dockerd",
}

// fakeAptGet stands in for apt-get on the fresh PATH. Like the real one it
// talks on stdout, and an install puts the package's command on PATH. The
// installs themselves are what a fresh machine's own run shows (the
// rehearsal in the closing notes); what this test checks is the scripts'
// side: which steps run when a tool is missing, and that no step's chatter
// reaches an output another script captures.
const fakeAptGet = `#!/bin/bash
echo "Reading package lists... Done"
echo "apt-get $*" >> "$FAKE_APT_LOG"
[ "$1" = install ] || exit 0
for pkg in "$@"; do
  case "$pkg" in
    -*|install) ;;
    debootstrap)
      cat > "$FAKE_BIN/debootstrap" <<'EOF'
#!/bin/bash
# debootstrap --variant=minbase SUITE DIR MIRROR, as far as a root filesystem's shape goes
echo "I: Retrieving InRelease"
dir=$3
mkdir -p "$dir/etc" "$dir/usr/bin" "$dir/var/cache/apt/archives" "$dir/var/lib/apt/lists"
echo bookworm > "$dir/etc/debian_version"
touch "$dir/var/cache/apt/archives/x.deb"
EOF
      chmod +x "$FAKE_BIN/debootstrap"; echo "Setting up debootstrap" ;;
    libprotobuf-dev) ;; # headers only: the test does not check them
    protobuf-compiler) printf '#!/bin/sh\necho libprotoc 3.21.12\n' > "$FAKE_BIN/protoc"; chmod +x "$FAKE_BIN/protoc" ;;
    postgresql) printf '#!/bin/sh\n' > "$FAKE_BIN/initdb"; chmod +x "$FAKE_BIN/initdb" ;;
    chromium) printf '#!/bin/sh\n' > "$FAKE_BIN/chromium"; chmod +x "$FAKE_BIN/chromium" ;;
    chromium-headless-shell) printf '#!/bin/sh\n' > "$FAKE_BIN/chromium-headless-shell"; chmod +x "$FAKE_BIN/chromium-headless-shell" ;;
    *) echo "E: Unable to locate package $pkg"; exit 100 ;;
  esac
  echo "Setting up $pkg ..."
done
`

// freshPath makes a directory of links to every command on PATH except
// the absent ones, plus fake apt-get, and returns it with the apt log.
func freshPath(t *testing.T) (bin, aptLog string) {
	t.Helper()
	bin = t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if slices.Contains(absent, name) || name == "apt-get" {
				continue
			}
			link := filepath.Join(bin, name)
			if _, err := os.Lstat(link); err == nil {
				continue // an earlier PATH entry wins, as in the shell
			}
			if err := os.Symlink(filepath.Join(dir, name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(fakeAptGet), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, filepath.Join(t.TempDir(), "apt.log")
}

// runFresh runs a script of scripts/ with the fresh PATH and returns its
// stdout and stderr apart.
func runFresh(t *testing.T, bin, aptLog string, env []string, script string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "bash"), append([]string{filepath.Join(repoRoot, "scripts", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin, "FAKE_BIN="+bin, "FAKE_APT_LOG="+aptLog, "SOVEREIGN_CHROME=")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", script, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// TestInstallStepsWithToolsAbsent runs the install steps as a new machine
// does, with none of what they install on PATH. A fresh machine's `make
// test` once failed at its last step: docker-offline.sh captured the
// root filesystem's path from a function whose deps.sh call printed
// "installing debootstrap (apt-get)…" on stdout, and `docker import` was
// handed that line as a file name.
func TestInstallStepsWithToolsAbsent(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("deps.sh installs as root (or with sudo); run as root")
	}
	bin, aptLog := freshPath(t)
	for _, name := range absent {
		if _, err := os.Lstat(filepath.Join(bin, name)); err == nil {
			t.Fatalf("%s is on the fresh PATH", name)
		}
	}

	t.Run("deps", func(t *testing.T) {
		// Every component deps.sh installs when missing: progress on
		// stderr, nothing on stdout.
		for _, c := range []struct{ component, pkg string }{
			{"debootstrap", "debootstrap"},
			{"protoc", "protobuf-compiler"},
			{"postgres", "postgresql"},
			{"chromium", "chromium"},
		} {
			if c.component == "postgres" && hasPostgresBin() {
				continue // deps.sh also looks in /usr/lib/postgresql/*/bin, which no PATH hides
			}
			stdout, stderr := runFresh(t, bin, aptLog, nil, "deps.sh", c.component)
			if stdout != "" {
				t.Errorf("deps.sh %s printed on stdout (scripts capture it):\n%s", c.component, stdout)
			}
			if !strings.Contains(stderr, "installing "+c.pkg) {
				t.Errorf("deps.sh %s: stderr %q does not say it installs %s", c.component, stderr, c.pkg)
			}
			log, _ := os.ReadFile(aptLog)
			if !strings.Contains(string(log), "install") || !strings.Contains(string(log), " "+c.pkg) {
				t.Errorf("deps.sh %s did not apt-get install %s; apt-get saw:\n%s", c.component, c.pkg, log)
			}
		}
	})

	t.Run("rootfs", func(t *testing.T) {
		// docker-offline.sh rootfs installs debootstrap when missing and
		// prints only the tarball's path: what debian_image hands to
		// `docker import`.
		if err := os.Remove(filepath.Join(bin, "debootstrap")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		cache := t.TempDir()
		stdout, stderr := runFresh(t, bin, aptLog, []string{"XDG_CACHE_HOME=" + cache}, "docker-offline.sh", "rootfs")
		want := filepath.Join(cache, "sovereign-e2e", "rootfs", "bookworm-minbase.tar")
		if stdout != want+"\n" {
			t.Fatalf("docker-offline.sh rootfs printed %q on stdout, want only the path %q\nstderr:\n%s", stdout, want, stderr)
		}
		tarList, err := exec.Command("tar", "-tf", want).Output()
		if err != nil {
			t.Fatalf("tar -tf %s: %v", want, err)
		}
		if !strings.Contains(string(tarList), "./etc/debian_version") || strings.Contains(string(tarList), ".deb") {
			t.Errorf("the root filesystem tarball holds:\n%s\nwant etc/debian_version and no cached .deb", tarList)
		}
		// Cached: a second run does not install or bootstrap again.
		before, _ := os.ReadFile(aptLog)
		if stdout2, _ := runFresh(t, bin, aptLog, []string{"XDG_CACHE_HOME=" + cache}, "docker-offline.sh", "rootfs"); stdout2 != stdout {
			t.Errorf("second run printed %q, want %q", stdout2, stdout)
		}
		if after, _ := os.ReadFile(aptLog); !bytes.Equal(before, after) {
			t.Errorf("second run called apt-get again:\n%s", after[len(before):])
		}
	})
}

func hasPostgresBin() bool {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	return len(m) > 0
}
