package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

// EnvCompose turns on TestCompose, which needs a Docker engine with the
// compose and buildx plugins and the base images (make e2e-compose
// provides them).
const EnvCompose = "SOVEREIGN_E2E_COMPOSE"

// composeProject is the project name TestCompose runs under, so that its
// `down -v` never touches an operator's own "sovereign" project.
const composeProject = "sovereign-e2e"

// Where deploy/compose.yaml publishes things on loopback (.env defaults).
const (
	composeMCP     = "http://127.0.0.1:8080/mcp"
	composeMetrics = "http://127.0.0.1:8080/metrics"
	composeConsole = "http://127.0.0.1:8086/"
	composeJaeger  = "http://127.0.0.1:16686"
	composeNATS    = "nats://127.0.0.1:4222"
)

// TestCompose runs deploy/compose.yaml for real, as deploy/README.md tells
// a user, step for step: secrets from the templates, `docker compose
// build`, `up -d nats`, the secret key and an API token through the cli
// service, `up -d`; then it drives the stack through the published gateway
// with MCP clients whose sessions cover all three workers, finds one
// call's trace in Jaeger, scrapes /metrics, restarts the project with
// `down` and `up` (tokens, secrets and history kept), kills a browser
// container while clients browse (its sessions fail at once, the others
// carry on, the engine restarts it), and does the same with the postgres
// profile. Everything is removed at the end (`down -v`), also on failure.
func TestCompose(t *testing.T) {
	if os.Getenv(EnvCompose) == "" {
		t.Skipf("set %s=1 (make e2e-compose) to run the compose project on a Docker engine", EnvCompose)
	}
	ctx := callCtx(t, 40*time.Minute)
	d := newComposeDeploy(t)

	// Secrets: every template copied, the generated ones filled in.
	adminToken := randomHex(32)
	d.writeSecrets(map[string]string{
		"gateway.env": "SOVEREIGN_ADMIN_TOKEN=" + adminToken + "\n",
		"signer.env":  "SOVEREIGN_SIGNER_PASSPHRASE=" + randomHex(16) + "\n",
		"agent.env":   "",
	})

	d.step(ctx, "docker compose build", "build")
	d.step(ctx, "docker compose up -d nats", "up", "-d", "nats")
	key := lastLine(d.step(ctx, "secret keygen", "run", "--rm", "-T", "cli", "secret", "keygen"))
	key = strings.TrimPrefix(key, "SOVEREIGN_SECRET_KEY=")
	d.writeSecrets(map[string]string{"browser.env": "SOVEREIGN_SECRET_KEY=" + key + "\n"})
	// One token opens every session of the test: its limit is raised above
	// the gateway's default of 8 browser sessions per caller.
	out := d.step(ctx, "token create", "run", "--rm", "-T", "cli", "token", "create", "--name", "laptop", "--max-sessions", "64")
	token := regexp.MustCompile(`svt_[A-Za-z0-9_-]+`).FindString(out)
	if token == "" {
		t.Fatalf("token create printed no svt_ token:\n%s", out)
	}
	d.stdin = "e2e secret value\n"
	d.step(ctx, "secret set", "run", "--rm", "-T", "cli", "secret", "set", "E2E_KEPT")
	d.stdin = ""
	d.up(ctx)

	// Sessions on all three workers; calls through the published gateway.
	fleet := d.workers(ctx)
	clients := d.spread(ctx, token, fleet, 3)
	lat := browseForm(t, ctx, clients, 20)
	t.Logf("latency of one eval call through compose (%d calls): %s", len(lat), summarize(lat))

	// The browser image carries Node and the Lighthouse runner: on the
	// blank page, lighthouse_audit gets past them to the page check (a
	// worker without them would say "not installed"; the workers reach no
	// web page here to audit).
	if res, err := clients[0].Tool(ctx, "lighthouse_audit", map[string]any{"mode": "snapshot"}); res == nil || !strings.Contains(res.Text(), "lighthouse_audit audits web pages") {
		t.Errorf("lighthouse_audit in the browser image = %v, want the web-page check (Node and the runner present)", err)
	}

	// One call's trace, with the gateway's and a worker's spans.
	traceOneCall(t, ctx, &harness.Jaeger{Query: composeJaeger}, mcpClient(t, ctx, token))

	// Metrics and the console, as published.
	metrics := httpGet(t, ctx, composeMetrics, token)
	for _, want := range []string{`sovereign_tool_calls_total{`, `tool="eval"`, `sovereign_tool_call_duration_seconds_bucket{`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics through the published port lacks %s", want)
		}
	}
	if logs := d.compose(ctx, "logs", "--no-color", "gateway"); strings.Contains(logs, "operator console listens beyond loopback") {
		t.Errorf("the gateway warns about its console although compose publishes it on loopback only")
	} else if !strings.Contains(logs, composeConsole) {
		t.Errorf("the gateway's log does not name the console's published URL %s", composeConsole)
	}
	httpGet(t, ctx, composeConsole+"login", "")

	// down and up: tokens, secrets and history survive in the volumes.
	before := d.auditCount(ctx)
	d.step(ctx, "docker compose down", "down")
	d.up(ctx)
	c := mcpClient(t, ctx, token)
	if _, err := c.Tool(ctx, "get_url", nil); err != nil {
		t.Errorf("the token created before down/up: %v", err)
	}
	if list := d.compose(ctx, "run", "--rm", "-T", "cli", "secret", "list"); !strings.Contains(list, "E2E_KEPT") {
		t.Errorf("secret list after down/up lacks E2E_KEPT:\n%s", list)
	}
	if after := d.auditCount(ctx); after < before || before == 0 {
		t.Errorf("audit records: %d before down/up, %d after; want them kept", before, after)
	} else {
		t.Logf("audit records kept across down/up: %d before, %d after", before, after)
	}

	// A browser container dies while clients browse.
	d.killWorker(ctx, token)

	// The postgres profile, the same way.
	d.step(ctx, "docker compose down", "down")
	p := randomHex(24)
	d.writeSecrets(map[string]string{"postgres.env": "POSTGRES_PASSWORD=" + p + "\nPGPASSWORD=" + p + "\n"})
	d.profile = "postgres"
	d.up(ctx)
	if ps := d.compose(ctx, "ps", "--format", "{{.Service}}"); !strings.Contains(ps, "history-postgres") || strings.Contains(ps, "history\n") {
		t.Errorf("services with --profile postgres:\n%s", ps)
	}
	clients = d.spread(ctx, token, d.workers(ctx), 1)
	browseForm(t, ctx, clients, 3)
	before = d.auditCount(ctx)
	d.step(ctx, "docker compose --profile postgres down", "down")
	d.up(ctx)
	if after := d.auditCount(ctx); after < before || before == 0 {
		t.Errorf("audit records in PostgreSQL: %d before down/up, %d after; want them kept", before, after)
	} else {
		t.Logf("audit records in PostgreSQL kept across down/up: %d before, %d after", before, after)
	}
	c = mcpClient(t, ctx, token)
	if _, err := c.Tool(ctx, "get_url", nil); err != nil {
		t.Errorf("a call on the postgres profile after down/up: %v", err)
	}
}

// composeDeploy runs docker compose in deploy/ for one test.
type composeDeploy struct {
	t       *testing.T
	dir     string // deploy/
	profile string // --profile (default: .env's COMPOSE_PROFILES)
	stdin   string
	written []string // secrets files this test wrote
}

func newComposeDeploy(t *testing.T) *composeDeploy {
	dir, err := filepath.Abs(filepath.Join("..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	d := &composeDeploy{t: t, dir: dir}
	// Never an operator's own secrets: this test writes and removes them.
	for _, f := range d.secretFiles() {
		if _, err := os.Stat(f); err == nil {
			t.Fatalf("%s exists: TestCompose writes its own secrets there; move it away first", f)
		}
	}
	// What an earlier run left behind (a killed test binary) goes first.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.downAll(ctx); err != nil {
		t.Fatalf("before the test: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := d.run(ctx, "--profile", "postgres", "--profile", "sqlite", "logs", "--no-color", "--tail", "40")
			t.Logf("docker compose logs --tail 40:\n%s", out)
		}
		if err := d.downAll(ctx); err != nil {
			t.Error(err)
		}
		for _, f := range d.written {
			os.Remove(f)
		}
	})
	return d
}

// downAll removes the project's containers, networks and volumes, of
// every profile.
func (d *composeDeploy) downAll(ctx context.Context) error {
	if out, err := d.run(ctx, "--profile", "postgres", "--profile", "sqlite", "--profile", "tools", "down", "-v", "--remove-orphans"); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

func (d *composeDeploy) secretFiles() []string {
	examples, _ := filepath.Glob(filepath.Join(d.dir, "secrets", "*.env.example"))
	var out []string
	for _, e := range examples {
		out = append(out, strings.TrimSuffix(e, ".example"))
	}
	return out
}

// writeSecrets copies each template to secrets/NAME (mode 0600), as the
// README says, with the given lines appended (env_file: the last wins).
func (d *composeDeploy) writeSecrets(files map[string]string) {
	d.t.Helper()
	for name, lines := range files {
		path := filepath.Join(d.dir, "secrets", name)
		tmpl, err := os.ReadFile(path + ".example")
		if err != nil {
			d.t.Fatal(err)
		}
		// The template's empty assignments of the variables set here go.
		for _, l := range strings.Split(lines, "\n") {
			if k, _, ok := strings.Cut(l, "="); ok {
				tmpl = regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(k)+`=$\n?`).ReplaceAll(tmpl, nil)
			}
		}
		if err := os.WriteFile(path, append(tmpl, lines...), 0o600); err != nil {
			d.t.Fatal(err)
		}
		if !slices.Contains(d.written, path) {
			d.written = append(d.written, path)
		}
	}
}

// run runs docker compose with args in deploy/ and returns its output.
func (d *composeDeploy) run(ctx context.Context, args ...string) (string, error) {
	if d.profile != "" {
		args = append([]string{"--profile", d.profile}, args...)
	}
	cmd := exec.CommandContext(ctx, "docker", append([]string{"compose"}, args...)...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME="+composeProject, "COMPOSE_PROGRESS=plain")
	cmd.Stdin = strings.NewReader(d.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("docker compose %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// compose runs docker compose and fails the test if it fails.
func (d *composeDeploy) compose(ctx context.Context, args ...string) string {
	d.t.Helper()
	out, err := d.run(ctx, args...)
	if err != nil {
		d.t.Fatalf("%v\n%s", err, tailLines(out, 60))
	}
	return out
}

// step is compose with its duration logged.
func (d *composeDeploy) step(ctx context.Context, what string, args ...string) string {
	d.t.Helper()
	start := time.Now()
	out := d.compose(ctx, args...)
	d.t.Logf("%s: %s", what, time.Since(start).Round(100*time.Millisecond))
	return out
}

// psEntry is one line of `docker compose ps --format json`.
type psEntry struct {
	ID, Service, State, Health string
}

func (d *composeDeploy) ps(ctx context.Context) []psEntry {
	d.t.Helper()
	out := d.compose(ctx, "ps", "-a", "--format", "json")
	var list []psEntry
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		var e psEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			d.t.Fatalf("docker compose ps: %v in %q", err, l)
		}
		list = append(list, e)
	}
	return list
}

// up runs `docker compose up -d` and waits until every container is
// healthy (those without a healthcheck: running).
func (d *composeDeploy) up(ctx context.Context) {
	d.t.Helper()
	d.step(ctx, "docker compose up -d", "up", "-d")
	start := time.Now()
	d.waitHealthy(ctx, 5*time.Minute)
	d.t.Logf("all containers healthy %s after up -d returned", time.Since(start).Round(100*time.Millisecond))
}

func (d *composeDeploy) waitHealthy(ctx context.Context, timeout time.Duration) {
	d.t.Helper()
	kittest.Eventually(d.t, timeout, func() error {
		list := d.ps(ctx)
		var waiting []string
		for _, e := range list {
			if e.State != "running" || (e.Health != "" && e.Health != "healthy") {
				waiting = append(waiting, fmt.Sprintf("%s %s %s", e.Service, e.State, e.Health))
			}
		}
		return kittest.Check(len(list) > 0 && len(waiting) == 0, "not healthy after up: %v", waiting)
	})
}

// auditCount is the number of audit records of the last hour (at most
// 1000), as the cli service lists them (history answers through NATS).
func (d *composeDeploy) auditCount(ctx context.Context) int {
	d.t.Helper()
	n := 0
	for _, l := range strings.Split(d.compose(ctx, "run", "--rm", "-T", "cli", "audit", "--since", "1h", "--json", "--limit", "1000"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			n++
		}
	}
	return n
}

// composeWorker is a live browser worker of the project.
type composeWorker struct {
	ID        string // the worker id (its container's host name, a suffix)
	Container string // the container id
}

// workers finds the live workers over the published NATS (the workers'
// micro service) and their containers (the worker id starts with the
// container's host name, its short id).
func (d *composeDeploy) workers(ctx context.Context) map[string]composeWorker {
	d.t.Helper()
	bc := composeBus(d.t)
	var containers []string
	for _, e := range d.ps(ctx) {
		if e.Service == "browser" && e.State == "running" {
			containers = append(containers, e.ID)
		}
	}
	out := map[string]composeWorker{}
	kittest.Eventually(d.t, 2*time.Minute, func() error {
		for _, id := range discoverWorkers(ctx, bc) {
			for _, c := range containers {
				if len(c) >= 12 && strings.HasPrefix(id, c[:12]+"-") {
					out[id] = composeWorker{ID: id, Container: c}
				}
			}
		}
		return kittest.Check(len(out) == len(containers) && len(out) > 0, "workers on the bus %v, browser containers %v", out, containers)
	})
	return out
}

var (
	busOnce sync.Once
	busConn *bus.Conn
	busErr  error
)

// composeBus is the test's connection to the project's NATS (published on
// loopback for the sovereign CLI).
func composeBus(t *testing.T) *bus.Conn {
	busOnce.Do(func() {
		nc, err := nats.Connect(composeNATS, nats.Name("sovereign-e2e-compose"), nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond))
		if err != nil {
			busErr = err
			return
		}
		busConn, busErr = bus.New(nc, "")
	})
	if busErr != nil {
		t.Fatalf("NATS at %s: %v", composeNATS, busErr)
	}
	return busConn
}

// discoverWorkers asks every sovereign-browser micro service for its info
// and returns the worker ids (from the ping endpoints' subjects).
func discoverWorkers(ctx context.Context, bc *bus.Conn) []string {
	nc := bc.NATS()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.INFO.sovereign-browser", inbox, nil); err != nil {
		return nil
	}
	ping := regexp.MustCompile(`\.browser\.w\.([^.]+)\.ping$|^browser\.w\.([^.]+)\.ping$`)
	var ids []string
	for {
		msg, err := sub.NextMsg(time.Second)
		if err != nil {
			break
		}
		var info struct {
			Endpoints []struct{ Subject string } `json:"endpoints"`
		}
		if json.Unmarshal(msg.Data, &info) != nil {
			continue
		}
		for _, e := range info.Endpoints {
			if m := ping.FindStringSubmatch(e.Subject); m != nil {
				ids = append(ids, m[1]+m[2])
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// sessionsOn asks each worker for its open sessions.
func sessionsOn(ctx context.Context, bc *bus.Conn, workers []string) map[string]int {
	out := map[string]int{}
	for _, id := range workers {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var resp browserv1.PingResponse
		if err := bc.Request(pctx, bc.Subject("browser", "w", id, "ping"), &browserv1.PingRequest{}, &resp); err == nil {
			out[id] = int(resp.GetSessions())
		}
		cancel()
	}
	return out
}

// mcpClient initializes a raw MCP client on the published gateway.
func mcpClient(t *testing.T, ctx context.Context, token string) *harness.MCPClient {
	t.Helper()
	c := harness.NewMCPClient(composeMCP)
	c.Header.Set("Authorization", "Bearer "+token)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatalf("initialize %s: %v", composeMCP, err)
	}
	return c
}

// placedClient is an MCP client whose browser session is on Worker.
type placedClient struct {
	*harness.MCPClient
	Worker string
}

// spread opens sessions (one per client: a first call opens it) until
// every worker holds at least perWorker of them, and returns the clients.
func (d *composeDeploy) spread(ctx context.Context, token string, workers map[string]composeWorker, perWorker int) []placedClient {
	d.t.Helper()
	return spreadSessions(d.t, ctx, composeBus(d.t), slices.Sorted(maps.Keys(workers)), perWorker,
		func() *harness.MCPClient { return mcpClient(d.t, ctx, token) })
}

// spreadSessions opens sessions with new clients from dial (one per
// client: a first call opens it) until every one of workers holds at least
// perWorker of them, and returns the clients.
func spreadSessions(t *testing.T, ctx context.Context, bc *bus.Conn, workers []string, perWorker int, dial func() *harness.MCPClient) []placedClient {
	t.Helper()
	var out []placedClient
	for range 8 * len(workers) * perWorker {
		before := sessionsOn(ctx, bc, workers)
		c := dial()
		tool(t, ctx, c, "open", map[string]any{"url": "about:blank"})
		after := sessionsOn(ctx, bc, workers)
		for id, n := range after {
			if n == before[id]+1 {
				out = append(out, placedClient{c, id})
				break
			}
		}
		per := map[string]int{}
		for _, p := range out {
			per[p.Worker]++
		}
		done := len(per) == len(workers)
		for _, n := range per {
			done = done && n >= perWorker
		}
		if done {
			t.Logf("%d sessions over %d workers: %v", len(out), len(workers), per)
			return out
		}
	}
	t.Fatalf("%d sessions did not reach every one of %d workers", len(out), len(workers))
	return nil
}

// composePage builds a small form in the session's blank page: the workers
// reach no test server (they are in containers), and about: is allowed.
const composePage = `document.body.innerHTML = '<input id="name"><button id="save" onclick="document.querySelector(\'#out\').textContent = \'saved \' + document.querySelector(\'#name\').value">save</button><p id="out"></p>'; 'ok'`

// browseForm has every client build the form of composePage in its page,
// fill and submit it, then call eval n times (all clients at once); it
// returns the eval latencies.
func browseForm(t *testing.T, ctx context.Context, clients []placedClient, n int) []time.Duration {
	t.Helper()
	raw := make([]*harness.MCPClient, len(clients))
	for i, c := range clients {
		raw[i] = c.MCPClient
	}
	var mu sync.Mutex
	var lat []time.Duration
	each(t, "browse", raw, func(i int, c *harness.MCPClient) error {
		if _, err := callText(ctx, c, "eval", map[string]any{"script": composePage}); err != nil {
			return err
		}
		v := fmt.Sprintf("client %d", i)
		if _, err := callText(ctx, c, "fill", map[string]any{"selector": "#name", "value": v}); err != nil {
			return err
		}
		if _, err := callText(ctx, c, "click", map[string]any{"selector": "#save"}); err != nil {
			return err
		}
		got, err := callText(ctx, c, "get_text", map[string]any{"selector": "#out"})
		if err != nil {
			return err
		}
		if err := want("#out", got, "saved "+v); err != nil {
			return err
		}
		for range n {
			start := time.Now()
			got, err := callText(ctx, c, "eval", map[string]any{"script": "document.querySelector('#name').value"})
			took := time.Since(start)
			if err != nil {
				return err
			}
			if err := want("input value", unquote(got), v); err != nil {
				return err
			}
			mu.Lock()
			lat = append(lat, took)
			mu.Unlock()
		}
		return nil
	})
	return lat
}

// killWorker kills (docker kill) the container of a worker that holds a
// session with a call in flight while clients on other workers keep
// browsing: the call fails promptly saying the session is lost, the others
// see no error; `docker compose up -d` starts the container again, its new
// worker joins, and the client of the lost session gets a new one. Then a
// crash (the container's init process killed) is restarted by the engine
// (restart: unless-stopped), which leaves containers that docker kill
// stopped alone.
func (d *composeDeploy) killWorker(ctx context.Context, token string) {
	t := d.t
	t.Helper()
	workers := d.workers(ctx)
	clients := d.spread(ctx, token, workers, 1)
	browseForm(t, ctx, clients, 1)
	victim := clients[0]
	var others []placedClient
	for _, c := range clients {
		if c.Worker != victim.Worker {
			others = append(others, c)
		}
	}

	done := waitInFlight(ctx, victim.MCPClient)
	// The others browse throughout.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var otherErrs []string
	calls := 0
	for _, c := range others {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := callText(ctx, c.MCPClient, "eval", map[string]any{"script": "document.querySelector('#name').value"})
				mu.Lock()
				calls++
				if err != nil {
					otherErrs = append(otherErrs, err.Error())
				}
				mu.Unlock()
				time.Sleep(100 * time.Millisecond) // the other clients' pace while one session is handed over
			}
		})
	}
	time.Sleep(2 * time.Second) // the wait call runs on the worker
	container := workers[victim.Worker].Container
	restarts := inspect(t, ctx, container, "{{.RestartCount}}")
	killed := time.Now()
	if out, err := exec.CommandContext(ctx, "docker", "kill", container).CombinedOutput(); err != nil {
		t.Fatalf("docker kill %s: %v\n%s", container, err, out)
	}
	lostInFlight(t, done, killed, 10*time.Second)

	close(stop)
	wg.Wait()
	t.Logf("%d calls of the clients on the other workers during the kill, %d failed", calls, len(otherErrs))
	if len(otherErrs) > 0 {
		t.Errorf("calls of clients on the other workers failed during the kill: %v", otherErrs)
	}

	// `docker kill` is a stop the engine does not undo (restart:
	// unless-stopped); `docker compose up -d` starts the container again.
	if st := inspect(t, ctx, container, "{{.State.Status}} {{.RestartCount}}"); st != "exited "+restarts {
		t.Errorf("the killed container is %q, want exited and not restarted (%s restarts before)", st, restarts)
	}
	d.step(ctx, "docker compose up -d after docker kill", "up", "-d")
	d.waitHealthy(ctx, 3*time.Minute)
	if after := d.workers(ctx); len(after) != len(workers) {
		t.Errorf("%d workers after up -d, want %d", len(after), len(workers))
	}
	// The client of the lost session gets a fresh one.
	if got, err := callText(ctx, victim.MCPClient, "get_url", nil); err != nil {
		t.Errorf("the next call of the client whose session was lost: %v", err)
	} else {
		t.Logf("the client whose session was lost is on a fresh page: %q", got)
	}

	// A crash (the container's process dies) is restarted by the engine.
	for _, w := range d.workers(ctx) {
		container = w.Container
		break
	}
	restarts = inspect(t, ctx, container, "{{.RestartCount}}")
	pid := inspect(t, ctx, container, "{{.State.Pid}}")
	crashed := time.Now()
	if out, err := exec.CommandContext(ctx, "kill", "-KILL", pid).CombinedOutput(); err != nil {
		t.Fatalf("kill -KILL %s (the init process of %s): %v\n%s", pid, container, err, out)
	}
	kittest.Eventually(t, 3*time.Minute, func() error {
		n, health := inspect(t, ctx, container, "{{.RestartCount}}"), inspect(t, ctx, container, "{{.State.Health.Status}}")
		return kittest.Check(n != restarts && health == "healthy", "the crashed browser container is not restarted and healthy: restarts %s, health %s", n, health)
	})
	t.Logf("a crashed browser container was restarted by the engine and healthy after %s", time.Since(crashed).Round(100*time.Millisecond))
	if after := d.workers(ctx); len(after) != len(workers) {
		t.Errorf("%d workers after the crash and restart, want %d", len(after), len(workers))
	}
}

func inspect(t *testing.T, ctx context.Context, container, format string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "inspect", "-f", format, container).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v\n%s", container, err, out)
	}
	return strings.TrimSpace(string(out))
}

// httpGet fetches url (with the bearer token, if any) and returns its body;
// any status but 200 fails the test.
func httpGet(t *testing.T, ctx context.Context, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, tailLines(string(body), 5))
	}
	return string(body)
}

// summarize is the median, 95th percentile and maximum of ds.
func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no calls"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("median %s, p95 %s, max %s", q(0.5).Round(100*time.Microsecond), q(0.95).Round(100*time.Microsecond), s[len(s)-1].Round(100*time.Microsecond))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}
