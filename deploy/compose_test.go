package deploy

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"
)

// loadCompose loads compose.yaml in dir as `docker compose` does: .env
// read for interpolation, COMPOSE_PROFILES from it unless profiles are
// given (as --profile flags), the schema and consistency checks on. The
// process environment is left out so that the test sees what the files
// say. With resolveEnv false the services' env_file entries are not read,
// so Environment holds what compose.yaml itself sets.
func loadCompose(t *testing.T, dir string, resolveEnv bool, profiles ...string) *types.Project {
	t.Helper()
	opts := []cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(dir),
		cli.WithEnvFiles(),
		cli.WithDotEnv,
		cli.WithDefaultProfiles(profiles...),
	}
	if !resolveEnv {
		opts = append(opts, cli.WithoutEnvironmentResolution)
	}
	o, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := o.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load compose.yaml (profiles %v): %v", profiles, err)
	}
	return p
}

// sovereignService is what compose.yaml promises for one Sovereign service.
type sovereignService struct {
	name     string
	image    string // repository after the registry
	listen   map[string]string
	health   []string
	ports    []string // host_ip:published:target
	volume   string   // named volume mounted at /data
	replicas int
	envFile  string
	extra    map[string]string
}

// workspace is where the gateway's system tools act in the container.
const workspace = "/data/workspace"

var sovereignServices = []sovereignService{
	{
		name: "gateway", image: "sovereign-gateway",
		listen: map[string]string{"SOVEREIGN_LISTEN": "0.0.0.0:8080", "SOVEREIGN_ADMIN_LISTEN": "0.0.0.0:8086"},
		health: []string{"CMD", "/sovereign", "healthcheck", "http://127.0.0.1:8080/readyz"},
		ports:  []string{"127.0.0.1:8080:8080", "127.0.0.1:8086:8086"}, replicas: 1, envFile: "secrets/gateway.env",
		// System tools off unless .env turns them on; their workspace is
		// a volume (the root filesystem is read-only). The console knows
		// it is published on loopback only: no "beyond loopback" warning
		// at every start (TestComposeConsolePublished).
		extra: map[string]string{"SOVEREIGN_SYSTEM_TOOLS": "off", "SOVEREIGN_WORKSPACE": workspace, "SOVEREIGN_ADMIN_PUBLISHED": "127.0.0.1:8086"},
	},
	{
		name: "browser", image: "sovereign-browser",
		listen: map[string]string{"SOVEREIGN_BROWSER_LISTEN": "0.0.0.0:8091"},
		health: []string{"CMD", "/usr/local/bin/sovereign", "healthcheck", "http://127.0.0.1:8091/readyz"},
		// Three workers by default; each holds SOVEREIGN_MAX_SESSIONS.
		replicas: 3, envFile: "secrets/browser.env",
		// Chromium's sandbox stays on unless .env turns it off.
		extra: map[string]string{"SOVEREIGN_CHROME": "/usr/bin/chromium", "SOVEREIGN_MAX_SESSIONS": "16", "SOVEREIGN_CHROME_SANDBOX": "auto"},
	},
	{
		name: "signer", image: "sovereign-signer",
		listen: map[string]string{"SOVEREIGN_SIGNER_LISTEN": "0.0.0.0:8093"},
		health: []string{"CMD", "/sovereign", "healthcheck", "http://127.0.0.1:8093/readyz"},
		volume: "signer-data", replicas: 1, envFile: "secrets/signer.env",
		extra: map[string]string{"SOVEREIGN_DATA_DIR": "/data"},
	},
	{
		name: "agent", image: "sovereign-agent",
		listen: map[string]string{"SOVEREIGN_AGENT_LISTEN": "0.0.0.0:8094"},
		health: []string{"CMD", "/sovereign", "healthcheck", "http://127.0.0.1:8094/readyz"},
		// Stateless: no volume, no published port.
		replicas: 1, envFile: "secrets/agent.env",
		extra: map[string]string{"SOVEREIGN_AGENT_MAX_RUNS": "8", "SOVEREIGN_AGENT_MAX_ITERATIONS": "100"},
	},
	{
		name: "history", image: "sovereign-history",
		listen: map[string]string{"SOVEREIGN_HISTORY_LISTEN": "0.0.0.0:8092"},
		health: []string{"CMD", "/sovereign", "healthcheck", "http://127.0.0.1:8092/readyz"},
		volume: "history-data", replicas: 1,
		extra: map[string]string{"SOVEREIGN_DATA_DIR": "/data"},
	},
}

// TestComposeDefault loads the project as `docker compose up` does with
// the shipped .env and checks every service: NATS with JetStream's config
// and store volume, Jaeger, and each Sovereign service with its image and
// build, the bus and OTLP endpoints, its listen address, ports, healthcheck
// on /readyz, replicas, volume, dependencies and hardening. History runs on
// SQLite: no postgres, no DSN.
func TestComposeDefault(t *testing.T) {
	p := loadCompose(t, ".", false)
	want := []string{"agent", "browser", "gateway", "history", "jaeger", "nats", "signer"}
	if got := sorted(p.ServiceNames()); !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	checkNATS(t, p)
	checkJaeger(t, p)
	for _, s := range sovereignServices {
		t.Run(s.name, func(t *testing.T) { checkSovereign(t, p, s) })
	}
	h := service(t, p, "history")
	if dsn := env(h, "SOVEREIGN_HISTORY_DSN"); dsn != "" {
		t.Errorf("history: SOVEREIGN_HISTORY_DSN = %q on the SQLite profile", dsn)
	}
	if got := sorted(p.WithoutUnnecessaryResources().VolumeNames()); !slices.Equal(got, []string{"gateway-workspace", "history-data", "nats-data", "signer-data"}) {
		t.Errorf("volumes in use = %v", got)
	}
}

// TestComposePostgresProfile: `docker compose --profile postgres up`
// replaces the SQLite history by history-postgres, which reaches the
// postgres service by a DSN without a password (pgx takes PGPASSWORD from
// secrets/postgres.env) and waits until postgres is healthy.
func TestComposePostgresProfile(t *testing.T) {
	p := loadCompose(t, ".", false, "postgres")
	want := []string{"agent", "browser", "gateway", "history-postgres", "jaeger", "nats", "postgres", "signer"}
	if got := sorted(p.ServiceNames()); !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	hp := sovereignServices[slices.IndexFunc(sovereignServices, func(s sovereignService) bool { return s.name == "history" })]
	hp.name = "history-postgres"
	checkSovereign(t, p, hp)

	h := service(t, p, "history-postgres")
	u, err := url.Parse(env(h, "SOVEREIGN_HISTORY_DSN"))
	if err != nil || u.Scheme != "postgres" || u.Host != "postgres:5432" || u.Path != "/sovereign" || u.User.Username() != "sovereign" {
		t.Errorf("SOVEREIGN_HISTORY_DSN = %q (%v), want postgres://sovereign@postgres:5432/sovereign…", env(h, "SOVEREIGN_HISTORY_DSN"), err)
	} else if _, set := u.User.Password(); set {
		t.Error("SOVEREIGN_HISTORY_DSN holds a password")
	}
	if d, ok := h.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("history-postgres depends on postgres = %+v, want service_healthy", d)
	}
	if !hasEnvFile(h, "secrets/postgres.env") {
		t.Error("history-postgres does not read secrets/postgres.env (PGPASSWORD)")
	}

	pg := service(t, p, "postgres")
	if env(pg, "POSTGRES_USER") != "sovereign" || env(pg, "POSTGRES_DB") != "sovereign" {
		t.Errorf("postgres env = %v", pg.Environment)
	}
	if !hasEnvFile(pg, "secrets/postgres.env") {
		t.Error("postgres does not read secrets/postgres.env (POSTGRES_PASSWORD)")
	}
	if !mounts(pg, "postgres-data", "/var/lib/postgresql/data") {
		t.Errorf("postgres volumes = %+v", pg.Volumes)
	}
	checkHealth(t, pg, "pg_isready")
	if len(pg.Ports) > 0 {
		t.Errorf("postgres publishes ports %+v: only history needs it", pg.Ports)
	}
}

// TestComposeCLI: `docker compose run --rm cli token create --name …`
// (which enables the tools profile for that service) runs the sovereign
// binary against the project's NATS and prints the client command for the
// published gateway port.
func TestComposeCLI(t *testing.T) {
	p := loadCompose(t, ".", false)
	p, err := p.WithServicesEnabled("cli")
	if err != nil {
		t.Fatal(err)
	}
	c := service(t, p, "cli")
	if !slices.Equal(c.Entrypoint, []string{"/sovereign"}) {
		t.Errorf("cli entrypoint = %v", c.Entrypoint)
	}
	if env(c, "NATS_URL") != "nats://nats:4222" {
		t.Errorf("cli NATS_URL = %q", env(c, "NATS_URL"))
	}
	if got := env(c, "SOVEREIGN_PUBLIC_URL"); got != "http://localhost:8080" {
		t.Errorf("cli SOVEREIGN_PUBLIC_URL = %q, want http://localhost:8080", got)
	}
	checkBuilt(t, c)
	if c.Image != service(t, p, "gateway").Image || c.Build == nil {
		t.Errorf("cli image %q (build %v): want the gateway's image, buildable", c.Image, c.Build != nil)
	}
	if d := c.DependsOn["nats"]; d.Condition != types.ServiceConditionHealthy {
		t.Errorf("cli depends on nats = %+v", d)
	}
	if !hasEnvFile(c, "secrets/browser.env") {
		t.Error("cli does not read secrets/browser.env (secret set needs the key)")
	}
}

// checkBuilt: a Sovereign image is built from this checkout, never pulled:
// with compose's default policy (missing), `up` asks the registry for the
// image's tag first, and would silently run a published :dev instead of
// the checkout.
func checkBuilt(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	if s.PullPolicy != types.PullPolicyBuild {
		t.Errorf("%s pull_policy = %q, want %q", s.Name, s.PullPolicy, types.PullPolicyBuild)
	}
}

// TestComposeSettingsReachTheirService: .env settings reach their service: SOVEREIGN_CHROME_SANDBOX=off (the documented
// switch for hosts without unprivileged user namespaces) reaches the
// workers, SOVEREIGN_PULL_POLICY=missing the images, and a moved console
// port the gateway's SOVEREIGN_ADMIN_PUBLISHED, which always names the
// published loopback port.
func TestComposeSettingsReachTheirService(t *testing.T) {
	p := loadWithSettings(t, map[string]string{
		"SOVEREIGN_CHROME_SANDBOX": "off", "SOVEREIGN_PULL_POLICY": "missing", "SOVEREIGN_ADMIN_PORT": "18086",
	}, nil)
	if got := env(service(t, p, "browser"), "SOVEREIGN_CHROME_SANDBOX"); got != "off" {
		t.Errorf("browser SOVEREIGN_CHROME_SANDBOX = %q, want off from the environment", got)
	}
	for _, name := range []string{"gateway", "browser", "signer", "agent", "history"} {
		if got := service(t, p, name).PullPolicy; got != types.PullPolicyMissing {
			t.Errorf("%s pull_policy = %q, want missing from the environment", name, got)
		}
	}
	g := service(t, p, "gateway")
	published := ""
	for _, port := range g.Ports {
		if port.Target == 8086 {
			published = port.HostIP + ":" + port.Published
		}
	}
	if got := env(g, "SOVEREIGN_ADMIN_PUBLISHED"); got != published || published != "127.0.0.1:18086" {
		t.Errorf("gateway SOVEREIGN_ADMIN_PUBLISHED = %q, console published on %q; want both 127.0.0.1:18086", got, published)
	}
}

func checkNATS(t *testing.T, p *types.Project) {
	n := service(t, p, "nats")
	if !strings.HasPrefix(n.Image, "nats:") {
		t.Errorf("nats image = %q", n.Image)
	}
	if !slices.Equal(n.Command, []string{"nats-server", "--config", "/etc/nats/nats.conf"}) {
		t.Errorf("nats command = %v", n.Command)
	}
	if !mounts(n, filepath.Join(p.WorkingDir, "nats.conf"), "/etc/nats/nats.conf") {
		t.Errorf("nats.conf is not mounted: %+v", n.Volumes)
	}
	if !mounts(n, "nats-data", "/data") {
		t.Errorf("the JetStream store (/data) is not on a volume: %+v", n.Volumes)
	}
	checkHealth(t, n, "http://127.0.0.1:8222/healthz?js-enabled-only=true")
	checkPorts(t, n, "127.0.0.1:4222:4222", "127.0.0.1:8222:8222")
}

func checkJaeger(t *testing.T, p *types.Project) {
	j := service(t, p, "jaeger")
	if !strings.HasPrefix(j.Image, "jaegertracing/jaeger:2.") {
		t.Errorf("jaeger image = %q, want Jaeger v2 (jaegertracing/jaeger:2.x)", j.Image)
	}
	checkHealth(t, j, "http://127.0.0.1:13133/status")
	checkPorts(t, j, "127.0.0.1:16686:16686", "127.0.0.1:4317:4317", "127.0.0.1:4318:4318")
}

func checkSovereign(t *testing.T, p *types.Project, want sovereignService) {
	t.Helper()
	s := service(t, p, want.name)
	if img := "ghcr.io/sovereign-fleet/" + want.image + ":dev"; s.Image != img {
		t.Errorf("image = %q, want %q", s.Image, img)
	}
	checkBuilt(t, s)
	if s.Build == nil {
		t.Error("no build section: `docker compose up` could not build a missing image")
	} else {
		df := filepath.Join(s.Build.Context, s.Build.Dockerfile)
		if _, err := os.Stat(df); err != nil {
			t.Errorf("build: %v", err)
		}
		if root, _ := filepath.Abs(repoRoot); s.Build.Context != root {
			t.Errorf("build context = %s, want the repository root %s", s.Build.Context, root)
		}
		if filepath.Base(df) != strings.TrimPrefix(want.image, "sovereign-")+".Dockerfile" {
			t.Errorf("build dockerfile = %s", s.Build.Dockerfile)
		}
		for _, a := range []string{"VERSION", "COMMIT"} {
			if v := s.Build.Args[a]; v == nil || *v == "" {
				t.Errorf("build arg %s not set", a)
			}
		}
	}
	wantEnv := map[string]string{
		"NATS_URL":                    "nats://nats:4222",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317",
		"SOVEREIGN_LOG_FORMAT":        "json",
	}
	for _, m := range []map[string]string{want.listen, want.extra} {
		for k, v := range m {
			wantEnv[k] = v
		}
	}
	for k, v := range wantEnv {
		if got := env(s, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if s.HealthCheck == nil || !slices.Equal(s.HealthCheck.Test, want.health) {
		t.Errorf("healthcheck = %+v, want %q", s.HealthCheck, want.health)
	} else {
		// The healthcheck asks the port the service listens on.
		port := ""
		for _, addr := range want.listen {
			port = addr[strings.LastIndex(addr, ":")+1:]
			break
		}
		if len(want.listen) == 1 && !strings.Contains(want.health[len(want.health)-1], ":"+port+"/readyz") {
			t.Errorf("healthcheck %q does not ask the listen port %s", want.health, port)
		}
	}
	if len(want.ports) > 0 {
		checkPorts(t, s, want.ports...)
	} else if len(s.Ports) > 0 {
		t.Errorf("publishes %+v: only the gateway is reachable from the host", s.Ports)
	}
	for _, dep := range []string{"nats", "jaeger"} {
		if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("depends_on %s = %+v, want service_healthy", dep, d)
		}
	}
	if got := s.GetScale(); got != want.replicas {
		t.Errorf("replicas = %d, want %d", got, want.replicas)
	}
	if want.volume != "" && !mounts(s, want.volume, "/data") {
		t.Errorf("volume %s is not mounted at /data: %+v", want.volume, s.Volumes)
	}
	if want.volume == "" && want.name != "gateway" && len(s.Volumes) > 0 {
		t.Errorf("volumes %+v: the service keeps no state of its own", s.Volumes)
	}
	// The system tools' workspace is a named volume: under a read-only
	// root nothing else is writable, and it outlives the container.
	if ws := env(s, "SOVEREIGN_WORKSPACE"); ws != "" && !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == ws && !v.ReadOnly
	}) {
		t.Errorf("SOVEREIGN_WORKSPACE %s is not a writable named volume: %+v", ws, s.Volumes)
	}
	if want.envFile != "" && !hasEnvFile(s, want.envFile) {
		t.Errorf("does not read %s", want.envFile)
	}
	for _, ef := range s.EnvFiles {
		if ef.Required {
			t.Errorf("env_file %s is required: `up` would fail before the operator writes it", ef.Path)
		}
	}
	if s.Restart != types.RestartPolicyUnlessStopped {
		t.Errorf("restart = %q", s.Restart)
	}
	if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("hardening: read_only %v, cap_drop %v, security_opt %v", s.ReadOnly, s.CapDrop, s.SecurityOpt)
	}
	if s.Privileged || len(s.CapAdd) > 0 || s.User == "0" || s.User == "root" {
		t.Errorf("privileged %v, cap_add %v, user %q", s.Privileged, s.CapAdd, s.User)
	}
	if !slices.ContainsFunc([]string(s.Tmpfs), func(m string) bool { return strings.HasPrefix(m, "/tmp:") }) {
		t.Errorf("no tmpfs on /tmp under a read-only root: %v", s.Tmpfs)
	}
	if want.name == "browser" {
		checkBrowser(t, p, s)
	}
}

// checkBrowser: Chromium's shared memory and profiles have room, HOME is
// writable, and the seccomp profile that keeps Chromium's sandbox working
// is the file the seccomp tests check.
func checkBrowser(t *testing.T, p *types.Project, s types.ServiceConfig) {
	if s.ShmSize < 64<<20 {
		t.Errorf("shm_size = %d", s.ShmSize)
	}
	if !slices.ContainsFunc([]string(s.Tmpfs), func(m string) bool { return strings.HasPrefix(m, "/home/sovereign:") }) {
		t.Errorf("HOME (/home/sovereign) is not a tmpfs: %v", s.Tmpfs)
	}
	seccompOpt := "seccomp=./" + seccompFile
	if !slices.Contains(s.SecurityOpt, seccompOpt) {
		t.Errorf("security_opt %v lacks %s", s.SecurityOpt, seccompOpt)
	}
	if _, err := os.Stat(filepath.Join(p.WorkingDir, seccompFile)); err != nil {
		t.Error(err)
	}
	if s.Deploy == nil || s.Deploy.Resources.Limits == nil || s.Deploy.Resources.Limits.MemoryBytes < 1<<30 {
		t.Errorf("no memory limit of at least 1 GiB: %+v", s.Deploy)
	}
	if s.ContainerName != "" {
		t.Errorf("container_name %q prevents replicas", s.ContainerName)
	}
}

// TestComposeNoSecrets: compose.yaml and .env hold no secret: no service's
// environment sets a token, key, passphrase or password (they come from
// secrets/*.env, read with env_file), the templates in secrets/ are empty,
// and git ignores the filled-in copies.
func TestComposeNoSecrets(t *testing.T) {
	secretish := regexp.MustCompile(`(?i)token|secret|passphrase|password|private_key|_KEY$`)
	for _, profiles := range [][]string{nil, {"postgres"}, {"sqlite", "tools"}} {
		p := loadCompose(t, ".", false, profiles...)
		for _, s := range p.Services {
			for k, v := range s.Environment {
				if secretish.MatchString(k) && v != nil && *v != "" {
					t.Errorf("%s: %s is set in compose.yaml", s.Name, k)
				}
				if v != nil && strings.Contains(*v, "://") {
					if u, err := url.Parse(*v); err == nil {
						if _, set := u.User.Password(); set {
							t.Errorf("%s: %s holds a password", s.Name, k)
						}
					}
				}
			}
		}
	}
	for k, v := range readEnvFile(t, ".env") {
		if secretish.MatchString(k) && v != "" {
			t.Errorf(".env sets %s", k)
		}
	}
	examples, _ := filepath.Glob("secrets/*.env.example")
	if len(examples) != 5 {
		t.Errorf("secret templates = %v, want agent, gateway, browser, signer, postgres", examples)
	}
	for _, f := range examples {
		for k, v := range readEnvFile(t, f) {
			if v != "" {
				t.Errorf("%s: %s has a value in the template", f, k)
			}
		}
		filled := strings.TrimSuffix(f, ".example")
		if err := exec.Command("git", "check-ignore", "-q", filled).Run(); err != nil {
			t.Errorf("git does not ignore deploy/%s (%v)", filled, err)
		}
	}
}

// TestComposeSecretsReachOnlyTheirService fills in every secrets/*.env
// template in a copy of the project, loads it with env_file resolution (as
// `up` does), and checks that each secret reaches the services that need it
// and no other: a browser rendering untrusted pages never holds the admin
// token or the signer's passphrase.
func TestComposeSecretsReachOnlyTheirService(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"compose.yaml", ".env", "nats.conf", seccompFile} {
		if err := copyFile(f, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	examples, _ := filepath.Glob("secrets/*.env.example")
	values := map[string]string{}
	for _, f := range examples {
		var b strings.Builder
		for k := range readEnvFile(t, f) {
			values[k] = "test-" + strings.ToLower(k)
			b.WriteString(k + "=" + values[k] + "\n")
		}
		dst := filepath.Join(dir, strings.TrimSuffix(f, ".example"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	where := map[string][]string{
		"SOVEREIGN_ADMIN_TOKEN":       {"gateway"},
		"SOVEREIGN_SECRET_KEY":        {"agent", "browser", "cli"},
		"SOVEREIGN_LLM_API_KEY":       {"agent"},
		"SOVEREIGN_LLM_BASE_URL":      {"agent"},
		"SOVEREIGN_LLM_MODEL":         {"agent"},
		"SOVEREIGN_SIGNER_PASSPHRASE": {"signer"},
		"POSTGRES_PASSWORD":           {"history-postgres", "postgres"},
		"PGPASSWORD":                  {"history-postgres", "postgres"},
	}
	if len(values) != len(where) {
		t.Fatalf("the templates hold %v, the test knows %v", sortedKeys(values), sortedKeys(where))
	}
	seen := map[string][]string{}
	for _, profiles := range [][]string{{"sqlite", "tools"}, {"postgres"}} {
		p := loadCompose(t, dir, true, profiles...)
		for _, s := range p.Services {
			for k, want := range values {
				if got := env(s, k); got == want && !slices.Contains(seen[k], s.Name) {
					seen[k] = append(seen[k], s.Name)
				}
			}
		}
	}
	for k, names := range where {
		if got := sorted(seen[k]); !slices.Equal(got, names) {
			t.Errorf("%s reaches %v, want %v", k, got, names)
		}
	}
}

// TestComposeVariables: every variable compose.yaml interpolates is listed
// in .env (so .env documents every port, image and version), and .env's
// value is the default compose.yaml falls back to, or empty.
func TestComposeVariables(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var model map[string]any
	if err := yaml.Unmarshal(raw, &model); err != nil {
		t.Fatal(err)
	}
	vars := template.ExtractVariables(model, template.DefaultPattern)
	dotenv := readEnvFile(t, ".env")
	for name, v := range vars {
		val, ok := dotenv[name]
		if !ok {
			t.Errorf("compose.yaml uses ${%s}; .env does not list it", name)
			continue
		}
		if v.Required {
			t.Errorf("${%s} is required: a plain `docker compose up` must work", name)
		}
		if val != "" && val != v.DefaultValue && !strings.Contains(v.DefaultValue, "${") {
			t.Errorf(".env %s=%q, compose.yaml defaults to %q", name, val, v.DefaultValue)
		}
	}
	for _, name := range []string{"SOVEREIGN_VERSION", "SOVEREIGN_GATEWAY_PORT", "NATS_IMAGE", "JAEGER_IMAGE", "POSTGRES_IMAGE", "JAEGER_UI_PORT", "SOVEREIGN_SYSTEM_TOOLS", "SOVEREIGN_AGENT_REPLICAS"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("compose.yaml does not use ${%s}", name)
		}
	}
	if got := dotenv["COMPOSE_PROFILES"]; got != "sqlite" {
		t.Errorf(".env COMPOSE_PROFILES = %q, want sqlite", got)
	}
}

// TestComposeAgent: the agent reads the provider from secrets/agent.env and
// the fleet's secret key from secrets/browser.env; its template documents
// the provider settings with an Ollama example whose host name the agent
// container resolves (host.docker.internal, mapped to the Docker host on
// Linux too); .env's SOVEREIGN_SYSTEM_TOOLS reaches the gateway; and with
// the provider filled in, the agent's environment carries it.
func TestComposeAgent(t *testing.T) {
	p := loadCompose(t, ".", false)
	a := service(t, p, "agent")
	for _, f := range []string{"secrets/agent.env", "secrets/browser.env"} {
		if !hasEnvFile(a, f) {
			t.Errorf("agent does not read %s", f)
		}
	}
	if !slices.Contains(a.ExtraHosts["host.docker.internal"], "host-gateway") {
		t.Errorf("agent extra_hosts = %v, want host.docker.internal:host-gateway (Ollama on the Docker host)", a.ExtraHosts)
	}
	if v := env(a, "SOVEREIGN_LLM_API_KEY"); v != "" {
		t.Errorf("compose.yaml sets the agent's API key")
	}

	// The template: the three provider settings, empty, and the Ollama
	// example (commented out) on the host name the container resolves.
	tmpl := readEnvFile(t, "secrets/agent.env.example")
	for _, k := range []string{"SOVEREIGN_LLM_BASE_URL", "SOVEREIGN_LLM_MODEL", "SOVEREIGN_LLM_API_KEY"} {
		if v, ok := tmpl[k]; !ok || v != "" {
			t.Errorf("secrets/agent.env.example: %s = %q (listed %v), want it listed and empty", k, v, ok)
		}
	}
	raw, err := os.ReadFile("secrets/agent.env.example")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#\s*SOVEREIGN_LLM_BASE_URL=(\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("secrets/agent.env.example has no commented SOVEREIGN_LLM_BASE_URL example")
	}
	u, err := url.Parse(string(m[1]))
	if err != nil || u.Scheme != "http" || u.Port() != "11434" || u.Path != "/v1" || len(a.ExtraHosts[u.Hostname()]) == 0 {
		t.Errorf("Ollama example %s (%v): want http://<a host the agent resolves>:11434/v1", m[1], err)
	}

	// .env turns the system tools on for agent runs only.
	p = loadWithSettings(t, map[string]string{"SOVEREIGN_SYSTEM_TOOLS": "agent"}, map[string]string{
		"agent.env": "SOVEREIGN_LLM_BASE_URL=http://host.docker.internal:11434/v1\nSOVEREIGN_LLM_MODEL=qwen3:8b\n",
	})
	if got := env(service(t, p, "gateway"), "SOVEREIGN_SYSTEM_TOOLS"); got != "agent" {
		t.Errorf("gateway SOVEREIGN_SYSTEM_TOOLS = %q, want agent (from .env)", got)
	}
	a = service(t, p, "agent")
	if env(a, "SOVEREIGN_LLM_BASE_URL") != "http://host.docker.internal:11434/v1" || env(a, "SOVEREIGN_LLM_MODEL") != "qwen3:8b" {
		t.Errorf("agent provider env = %q, %q", env(a, "SOVEREIGN_LLM_BASE_URL"), env(a, "SOVEREIGN_LLM_MODEL"))
	}
}

// loadWithSettings loads a copy of the project whose .env has settings
// changed (each must be a line of .env already) and whose secrets/ holds
// the given files.
func loadWithSettings(t *testing.T, settings, secrets map[string]string) *types.Project {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"compose.yaml", "nats.conf", seccompFile} {
		if err := copyFile(f, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	dotenv, err := os.ReadFile(".env")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range settings {
		line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + `=.*$`)
		if !line.Match(dotenv) {
			t.Fatalf(".env has no %s line", k)
		}
		dotenv = line.ReplaceAll(dotenv, []byte(k+"="+v))
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), dotenv, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range secrets {
		if err := os.WriteFile(filepath.Join(dir, "secrets", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return loadCompose(t, dir, true)
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

func hasEnvFile(s types.ServiceConfig, rel string) bool {
	return slices.ContainsFunc(s.EnvFiles, func(e types.EnvFile) bool {
		return strings.HasSuffix(filepath.ToSlash(e.Path), "/"+rel)
	})
}

func mounts(s types.ServiceConfig, source, target string) bool {
	return slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == source && v.Target == target
	})
}

func checkHealth(t *testing.T, s types.ServiceConfig, want string) {
	t.Helper()
	if s.HealthCheck == nil || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Test[0] != "CMD" || !slices.Contains(s.HealthCheck.Test, want) {
		t.Errorf("%s healthcheck = %+v, want a CMD with %s", s.Name, s.HealthCheck, want)
	}
}

func checkPorts(t *testing.T, s types.ServiceConfig, want ...string) {
	t.Helper()
	var got []string
	for _, p := range s.Ports {
		got = append(got, p.HostIP+":"+p.Published+":"+strconv.FormatUint(uint64(p.Target), 10))
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("%s ports = %v, want %v", s.Name, got, want)
	}
}

// readEnvFile reads KEY=value lines (comments and blanks skipped).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: %q is not KEY=value", path, line)
			continue
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}
