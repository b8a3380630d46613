package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite chromium-seccomp.json from Docker's default seccomp profile")

// sandboxSyscalls are what Chromium's namespace sandbox needs beyond Docker's
// default profile when the worker runs as a non-root user with every
// capability dropped: a user namespace (clone with CLONE_NEWUSER, unshare,
// setns) and chroot into it.
var sandboxSyscalls = []string{"chroot", "clone", "setns", "unshare"}

const seccompFile = "chromium-seccomp.json"

// chromiumProfile is Docker's default seccomp profile (the one the engine
// applies when none is given, from github.com/moby/profiles) plus an
// unconditional allow of sandboxSyscalls.
func chromiumProfile() *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: sandboxSyscalls, Action: specs.ActAllow},
		Comment: "Chromium's sandbox as a non-root user: create a user namespace and chroot in it " +
			"(Docker's default allows these only with CAP_SYS_ADMIN or CAP_SYS_CHROOT)",
	})
	return p
}

// TestChromiumSeccompProfile: chromium-seccomp.json (which compose.yaml
// gives the browser workers) is exactly Docker's default profile plus the
// sandbox rule. Run `go test -run TestChromiumSeccompProfile -update` after
// bumping github.com/moby/profiles.
func TestChromiumSeccompProfile(t *testing.T) {
	want, err := json.MarshalIndent(chromiumProfile(), "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(seccompFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from Docker's default profile plus the sandbox rule: run go test -run TestChromiumSeccompProfile -update", seccompFile)
	}
}

// TestChromiumSeccompAllowsSandbox loads chromium-seccomp.json the way the
// Docker engine does (seccomp.LoadProfile for a container spec) for the
// browser container: non-root, every capability dropped. The sandbox's
// syscalls are allowed whatever their arguments, where Docker's default
// profile for the same container denies them (which is why the profile
// exists), and the default's other denials stay.
func TestChromiumSeccompAllowsSandbox(t *testing.T) {
	body, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	noCaps := &specs.Spec{Process: &specs.Process{User: specs.User{UID: 10001, GID: 10001}, Capabilities: &specs.LinuxCapabilities{}}}
	ours, err := seccomp.LoadProfile(string(body), noCaps)
	if err != nil {
		t.Fatalf("LoadProfile(%s): %v", seccompFile, err)
	}
	def, err := seccomp.GetDefaultProfile(noCaps)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sandboxSyscalls {
		if !allowsAnyArgs(ours, name) {
			t.Errorf("%s: %s is not allowed for every argument", seccompFile, name)
		}
		if allowsAnyArgs(def, name) {
			t.Errorf("Docker's default profile allows %s without CAP_SYS_ADMIN: the custom profile may be unnecessary", name)
		}
	}
	if ours.DefaultAction != specs.ActErrno {
		t.Errorf("default action = %s, want %s", ours.DefaultAction, specs.ActErrno)
	}
	for _, name := range []string{"mount", "bpf", "kexec_load", "init_module", "reboot"} {
		if allowsAnyArgs(ours, name) {
			t.Errorf("%s allows %s", seccompFile, name)
		}
	}
	if len(ours.Syscalls) != len(def.Syscalls)+1 {
		t.Errorf("%s has %d rules for this container, want Docker's %d plus one", seccompFile, len(ours.Syscalls), len(def.Syscalls))
	}
}

// allowsAnyArgs reports whether a rule allows the syscall with no argument
// condition.
func allowsAnyArgs(sc *specs.LinuxSeccomp, name string) bool {
	for _, r := range sc.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 && slices.Contains(r.Names, name) {
			return true
		}
	}
	return false
}
