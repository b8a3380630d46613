package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// tiltCall is one call the Tiltfile made.
type tiltCall struct {
	fn     string
	args   starlark.Tuple
	kwargs map[string]starlark.Value
}

// runTiltfile runs the repository's Tiltfile in a Starlark interpreter whose
// Tilt built-ins record their calls (Tilt's own API is not available as a
// library); it returns the calls in order.
func runTiltfile(t *testing.T, mode string) []tiltCall {
	t.Helper()
	var calls []tiltCall
	record := func(name string, ret starlark.Value) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			kw := map[string]starlark.Value{}
			for _, p := range kwargs {
				kw[string(p[0].(starlark.String))] = p[1]
			}
			calls = append(calls, tiltCall{fn: name, args: args, kwargs: kw})
			return ret, nil
		})
	}
	cfgDict := starlark.NewDict(1)
	if mode != "" {
		_ = cfgDict.SetKey(starlark.String("mode"), starlark.String(mode))
	}
	config := starlarkStruct{"define_string": record("config.define_string", starlark.None), "parse": starlark.NewBuiltin("config.parse",
		func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return cfgDict, nil
		})}
	predeclared := starlark.StringDict{"config": config}
	for _, fn := range []string{"docker_compose", "dc_resource", "local_resource", "k8s_yaml", "k8s_resource", "sync", "docker_build_with_restart"} {
		predeclared[fn] = record(fn, starlark.None)
	}
	predeclared["helm"] = record("helm", starlark.String("<rendered>"))
	thread := &starlark.Thread{Name: "tiltfile", Load: func(_ *starlark.Thread, module string) (starlark.StringDict, error) {
		if module != "ext://restart_process" {
			t.Errorf("Tiltfile loads %q: only ext://restart_process is expected", module)
		}
		return starlark.StringDict{"docker_build_with_restart": predeclared["docker_build_with_restart"]}, nil
	}}
	src, err := os.ReadFile(filepath.Join(repoRoot, "Tiltfile"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "Tiltfile", src, predeclared); err != nil {
		t.Fatalf("Tiltfile: %v", err)
	}
	return calls
}

// starlarkStruct is a minimal struct value (config.define_string, …).
type starlarkStruct map[string]starlark.Value

func (s starlarkStruct) String() string        { return "struct" }
func (s starlarkStruct) Type() string          { return "struct" }
func (s starlarkStruct) Freeze()               {}
func (s starlarkStruct) Truth() starlark.Bool  { return true }
func (s starlarkStruct) Hash() (uint32, error) { return 0, nil }
func (s starlarkStruct) Attr(name string) (starlark.Value, error) {
	return s[name], nil
}
func (s starlarkStruct) AttrNames() []string { return nil }

func str(v starlark.Value) string {
	s, _ := starlark.AsString(v)
	return s
}

// TestTiltfile runs the Tiltfile in both modes: the chart mode builds one dev
// image per service from stages that exist, with the refs the dev values
// make the chart use, live-updates the host-built binary, and names only
// resources the chart renders; the compose mode points at the compose files.
func TestTiltfile(t *testing.T) {
	calls := runTiltfile(t, "")
	stages := map[string]bool{}
	stageList, _, _ := parseDockerfile(t, filepath.Join(repoRoot, "deploy/tilt/dev.Dockerfile"))
	for _, st := range stageList {
		stages[st.Name] = true
		if st.Name != "base" {
			if u := userOf(st); u != "10001:10001" {
				t.Errorf("dev stage %s runs as %q, want 10001:10001", st.Name, u)
			}
		}
	}
	var images, resources []string
	var binary, helm bool
	for _, c := range calls {
		switch c.fn {
		case "local_resource":
			binary = strings.Contains(str(c.kwargs["cmd"]), "CGO_ENABLED=0 GOOS=linux go build -o .tilt/sovereign ./services/sovereign/cmd/sovereign")
		case "docker_build_with_restart":
			ref := str(c.args[0])
			images = append(images, ref)
			if target := str(c.kwargs["target"]); !stages[target] {
				t.Errorf("%s: target %q is not a stage of deploy/tilt/dev.Dockerfile", ref, target)
			}
			if df := str(c.kwargs["dockerfile"]); df != "deploy/tilt/dev.Dockerfile" {
				t.Errorf("%s: dockerfile %s", ref, df)
			}
			if ep := c.kwargs["entrypoint"].(*starlark.List); ep.Len() < 2 || str(ep.Index(0)) != "/app/sovereign" {
				t.Errorf("%s: entrypoint %v", ref, ep)
			}
		case "helm":
			helm = str(c.args[0]) == "charts/sovereign" && strings.Contains(c.kwargs["values"].String(), "deploy/tilt/values.yaml")
		case "k8s_resource":
			resources = append(resources, str(c.args[0]))
		}
	}
	if !binary || !helm {
		t.Errorf("binary build %v, helm with the dev values %v", binary, helm)
	}
	want := []string{"sovereign-dev/sovereign-agent", "sovereign-dev/sovereign-browser", "sovereign-dev/sovereign-gateway", "sovereign-dev/sovereign-history", "sovereign-dev/sovereign-signer"}
	slices.Sort(images)
	if !slices.Equal(images, want) {
		t.Errorf("dev images %v, want %v (the chart's images under deploy/tilt/values.yaml)", images, want)
	}
	for _, r := range resources {
		if !strings.HasPrefix(r, "sov-sovereign-") {
			t.Errorf("k8s_resource %q is not a workload of the release 'sov'", r)
		}
	}
	// Every dev image has its resource, and NATS too.
	for _, img := range images {
		if r := "sov-" + strings.TrimPrefix(img, "sovereign-dev/"); !slices.Contains(resources, r) {
			t.Errorf("image %s: no k8s_resource %s", img, r)
		}
	}
	if !slices.Contains(resources, "sov-sovereign-nats") {
		t.Errorf("k8s_resources %v lack sov-sovereign-nats", resources)
	}

	// Compose mode: the compose project, and a resource for each Sovereign
	// service the default profile runs.
	calls = runTiltfile(t, "compose")
	var composeFile string
	var dc []string
	for _, c := range calls {
		switch c.fn {
		case "docker_compose":
			composeFile = str(c.args[0])
		case "dc_resource":
			dc = append(dc, str(c.args[0]))
		case "docker_build_with_restart", "k8s_yaml", "helm":
			t.Errorf("compose mode calls %s", c.fn)
		}
	}
	if composeFile != "deploy/compose.yaml" {
		t.Errorf("compose mode: docker_compose(%q), want deploy/compose.yaml", composeFile)
	}
	slices.Sort(dc)
	if want := []string{"agent", "browser", "gateway", "history", "signer"}; !slices.Equal(dc, want) {
		t.Errorf("compose mode dc_resources %v, want %v", dc, want)
	}
	p := loadCompose(t, ".", false)
	for _, name := range dc {
		service(t, p, name)
	}
}

// userOf is the last USER of a stage.
func userOf(st instructions.Stage) string {
	u := ""
	for _, c := range st.Commands {
		if uc, ok := c.(*instructions.UserCommand); ok {
			u = uc.User
		}
	}
	return u
}
