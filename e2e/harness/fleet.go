package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// Readiness bounds. Chromium on a loaded two-core machine can take a while
// to start, so worker readiness is the most generous.
const (
	natsReadyTimeout    = 15 * time.Second
	workerReadyTimeout  = 60 * time.Second
	gatewayReadyTimeout = 30 * time.Second
	stopGrace           = 5 * time.Second
)

// Fleet is a set of processes started together and stopped together.
type Fleet struct {
	Bins *Binaries
	// Dir holds data directories (JetStream store). The caller owns it.
	Dir string
	// Tee, when set, receives every process's output live (line-prefixed).
	Tee io.Writer

	mu    sync.Mutex
	procs []*Proc
	nc    *nats.Conn
	bus   *bus.Conn

	NATS     *NATS
	Workers  []*Worker
	Gateways []*Gateway
}

// NATS is a running nats-server.
type NATS struct {
	*Proc
	URL string
}

// Worker is a running `sovereign browser`.
type Worker struct {
	*Proc
	ID string
}

// Gateway is a running `sovereign gateway`.
type Gateway struct {
	*Proc
	// Base is http://127.0.0.1:PORT; MCP is Base + "/mcp".
	Base string
	MCP  string
}

// NewFleet returns an empty fleet that runs bins and keeps data under dir.
func NewFleet(bins *Binaries, dir string) *Fleet {
	return &Fleet{Bins: bins, Dir: dir}
}

func (f *Fleet) add(p *Proc) {
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
}

// anyPort is the listen address every process of a fleet is given: each
// binds a port of the kernel's choosing and logs the address it bound
// (LoggedURL), so no port is picked free and then lost to another socket
// before the process binds it.
const anyPort = "127.0.0.1:0"

// StartNATS starts nats-server with JetStream on a loopback port of its
// choosing and waits until it accepts connections.
func (f *Fleet) StartNATS(ctx context.Context) (*NATS, error) {
	n, err := f.runNATS(ctx, -1, "") // -1: nats-server's "any free port"
	if err != nil {
		return nil, err
	}
	if err := f.connect(n.URL); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.NATS = n
	f.mu.Unlock()
	return n, nil
}

// natsListening is how nats-server logs the address it listens on.
var natsListening = regexp.MustCompile(`Listening for client connections on (\S+)`)

// runNATS starts nats-server with JetStream on port (-1 for one it picks),
// its store under f.Dir (the same store each time, so a restart finds its
// data), and waits until it accepts connections and JetStream answers. The
// NATS is returned with the error when the server started but did not get
// ready.
func (f *Fleet) runNATS(ctx context.Context, port int, again string) (*NATS, error) {
	store := filepath.Join(f.Dir, "nats")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("nats store dir: %w", err)
	}
	p, err := StartProc("nats-server", f.Bins.NATSServer,
		[]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", store}, nil, f.Tee)
	if err != nil {
		return nil, err
	}
	f.add(p)
	n := &NATS{Proc: p}
	var addr string
	err = poll(ctx, natsReadyTimeout, p, "nats-server to say where it listens "+again, func(context.Context) error {
		m := natsListening.FindStringSubmatch(p.Output())
		if m == nil {
			return errors.New("no such line yet")
		}
		addr = m[1]
		return nil
	})
	if err != nil {
		return n, err
	}
	n.URL = "nats://" + addr
	err = poll(ctx, natsReadyTimeout, p, "nats-server to accept connections "+again+"on "+n.URL, func(ctx context.Context) error {
		nc, err := nats.Connect(n.URL, nats.Timeout(time.Second))
		if err != nil {
			return err
		}
		defer nc.Close()
		// JetStream must answer too: the gateway keeps its state in KV.
		js, err := nc.JetStream()
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(nats.Context(ctx))
		return err
	})
	return n, err
}

// connect opens the harness's own bus connection (for pinging workers).
func (f *Fleet) connect(url string) error {
	nc, err := nats.Connect(url, nats.Name("sovereign-e2e-harness"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("harness connection to %s: %w", url, err)
	}
	bc, err := bus.New(nc, "")
	if err != nil {
		nc.Close()
		return err
	}
	f.mu.Lock()
	f.nc, f.bus = nc, bc
	f.mu.Unlock()
	return nil
}

// StartUp runs everything in one `sovereign up` process (embedded NATS and
// the gateway on ports of their choosing, workers browser workers with ids
// "up" or "up-1", "up-2", …) and waits until the gateway is ready and every
// worker answers ping. The returned Workers all share the one process.
func (f *Fleet) StartUp(ctx context.Context, workers, maxSessions int, extra ...string) (*Gateway, error) {
	args := append([]string{"up", "--listen", anyPort, "--nats-listen", anyPort,
		"--data-dir", filepath.Join(f.Dir, "up"), "--workers", strconv.Itoa(workers),
		"--worker-id", "up", "--max-sessions", strconv.Itoa(maxSessions),
		"--allow-private"}, extra...) // the test pages are on loopback
	p, err := StartProc("sovereign up", f.Bins.Sovereign, args, nil, f.Tee)
	if err != nil {
		return nil, err
	}
	f.add(p)
	natsURL, err := p.LoggedURL(ctx, workerReadyTimeout, "embedded NATS ready")
	if err != nil {
		return nil, err
	}
	g, err := readyGateway(ctx, p, workerReadyTimeout)
	if err != nil {
		return nil, err
	}
	if err := f.connect(natsURL); err != nil {
		return nil, err
	}
	var ws []*Worker
	for i := range workers {
		id := "up"
		if workers > 1 {
			id = fmt.Sprintf("up-%d", i+1)
		}
		err := poll(ctx, workerReadyTimeout, p, "worker "+id+" to answer ping", func(ctx context.Context) error {
			_, err := f.Ping(ctx, id)
			return err
		})
		if err != nil {
			return nil, err
		}
		ws = append(ws, &Worker{Proc: p, ID: id})
	}
	f.mu.Lock()
	f.Workers = append(f.Workers, ws...)
	f.Gateways = append(f.Gateways, g)
	f.mu.Unlock()
	return g, nil
}

// readyGateway waits until the gateway in p logs the URL it serves MCP on
// and answers 200 on /readyz there.
func readyGateway(ctx context.Context, p *Proc, timeout time.Duration) (*Gateway, error) {
	mcp, err := p.LoggedURL(ctx, timeout, "MCP gateway serving")
	if err != nil {
		return nil, err
	}
	g := &Gateway{Proc: p, Base: strings.TrimSuffix(mcp, "/mcp"), MCP: mcp}
	return g, WaitHTTPReady(ctx, p, g.Base+"/readyz", timeout)
}

// StartWorker starts `sovereign browser` named id and waits until its ping
// endpoint answers on the bus (Chromium is up then).
func (f *Fleet) StartWorker(ctx context.Context, id string, maxSessions int, extra ...string) (*Worker, error) {
	w, err := f.startWorker(ctx, id, maxSessions, extra...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.Workers = append(f.Workers, w)
	f.mu.Unlock()
	return w, nil
}

// startWorker starts the worker and waits until it answers ping; it
// returns the worker with the error when it started but did not answer.
func (f *Fleet) startWorker(ctx context.Context, id string, maxSessions int, extra ...string) (*Worker, error) {
	if f.NATS == nil {
		return nil, errors.New("start NATS before workers")
	}
	// No health listener unless extra asks for one (--listen): workers
	// would all want the default port.
	args := append([]string{"browser", "--nats-url", f.NATS.URL, "--worker-id", id,
		"--max-sessions", strconv.Itoa(maxSessions), "--listen", ""}, extra...)
	p, err := StartProc("worker "+id, f.Bins.Sovereign, args, nil, f.Tee)
	if err != nil {
		return nil, err
	}
	f.add(p)
	w := &Worker{Proc: p, ID: id}
	err = poll(ctx, workerReadyTimeout, p, "worker "+id+" to answer ping", func(ctx context.Context) error {
		_, err := f.Ping(ctx, id)
		return err
	})
	return w, err
}

// StartGateway starts `sovereign gateway` on a port of its choosing and
// waits for /readyz to answer 200.
func (f *Fleet) StartGateway(ctx context.Context, extra ...string) (*Gateway, error) {
	if f.NATS == nil {
		return nil, errors.New("start NATS before gateways")
	}
	f.mu.Lock()
	name := fmt.Sprintf("gateway %d", len(f.Gateways)+1)
	f.mu.Unlock()
	args := append([]string{"gateway", "--nats-url", f.NATS.URL, "--listen", anyPort,
		"--allow-private"}, extra...) // the test pages are on loopback
	p, err := StartProc(name, f.Bins.Sovereign, args, nil, f.Tee)
	if err != nil {
		return nil, err
	}
	f.add(p)
	g, err := readyGateway(ctx, p, gatewayReadyTimeout)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.Gateways = append(f.Gateways, g)
	f.mu.Unlock()
	return g, nil
}

// startService starts `sovereign <args>` named name, which serves health
// and metrics on a port of its choosing (args hold --listen anyPort), and
// waits until it logs msg with its /readyz URL and that answers 200. It
// returns the process and its base URL (http://127.0.0.1:port).
func (f *Fleet) startService(ctx context.Context, name, msg string, args, env []string) (*Proc, string, error) {
	p, err := StartProc(name, f.Bins.Sovereign, args, env, f.Tee)
	if err != nil {
		return nil, "", err
	}
	f.add(p)
	ready, err := p.LoggedURL(ctx, gatewayReadyTimeout, msg)
	if err != nil {
		return p, "", err
	}
	return p, strings.TrimSuffix(ready, "/readyz"), WaitHTTPReady(ctx, p, ready, gatewayReadyTimeout)
}

// WaitHTTPReady polls url until it answers 200, p exits, or timeout passes.
func WaitHTTPReady(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, timeout, p, url+" to answer 200", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
}

// Bus returns the harness's own bus connection to the fleet's NATS (nil
// before NATS is up), for talking to workers directly.
func (f *Fleet) Bus() *bus.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bus
}

// Ping asks worker id for its load over the bus.
func (f *Fleet) Ping(ctx context.Context, id string) (*browserv1.PingResponse, error) {
	f.mu.Lock()
	bc := f.bus
	f.mu.Unlock()
	if bc == nil {
		return nil, errors.New("no NATS connection")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var resp browserv1.PingResponse
	if err := bc.Request(ctx, browserbus.Of(id).Ping.Subject(bc), &browserv1.PingRequest{}, &resp); err != nil {
		return nil, fmt.Errorf("ping worker %s: %w", id, err)
	}
	return &resp, nil
}

// Sessions returns the number of open sessions of each live worker (those
// that do not answer ping are left out).
func (f *Fleet) Sessions(ctx context.Context) map[string]int {
	f.mu.Lock()
	workers := append([]*Worker(nil), f.Workers...)
	f.mu.Unlock()
	out := make(map[string]int)
	for _, w := range workers {
		if exited, _ := w.Exited(); exited {
			continue
		}
		if r, err := f.Ping(ctx, w.ID); err == nil {
			out[w.ID] = int(r.GetSessions())
		}
	}
	return out
}

// Logs returns every process's output, each under a header.
func (f *Fleet) Logs() string {
	f.mu.Lock()
	procs := append([]*Proc(nil), f.procs...)
	f.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		status := "running"
		if exited, err := p.Exited(); exited {
			status = "exited"
			if err != nil {
				status = "exited: " + err.Error()
			}
		}
		fmt.Fprintf(&b, "===== %s (pid %d, %s) =====\n%s\n", p.Name, p.PID(), status, strings.TrimRight(p.Output(), "\n"))
	}
	return b.String()
}

// Close stops every process (gateways and workers first, NATS last), each
// with a short grace period, then kills what is left.
func (f *Fleet) Close() {
	f.mu.Lock()
	procs := append([]*Proc(nil), f.procs...)
	nc := f.nc
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if f.NATS != nil && p == f.NATS.Proc {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Stop(stopGrace)
		}()
	}
	wg.Wait()
	if nc != nil {
		nc.Close()
	}
	if f.NATS != nil {
		_ = f.NATS.Stop(stopGrace)
	}
}

// poll calls check until it succeeds, p exits, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, p *Proc, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last error
	for {
		if exited, err := p.Exited(); exited {
			return exitError(p, err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s for %s: %v (last error: %v)\n%s", time.Since(start).Round(time.Millisecond), what, ctx.Err(), last, outputTail(p))
		case <-p.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Token creates an API token named name on the fleet's NATS and returns
// it ("svt_…"), as `sovereign token create` does.
func (f *Fleet) Token(ctx context.Context, name string) (string, error) {
	ts, err := tokens.Open(ctx, f.Bus().NATS(), f.Bus().Prefix())
	if err != nil {
		return "", err
	}
	defer ts.Close()
	plain, _, err := ts.Create(ctx, tokens.Spec{Name: name})
	return plain, err
}
