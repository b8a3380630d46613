// Command bench measures what the Sovereign chain costs: the same browser
// actions made through the whole chain (HTTP MCP client → gateway → NATS →
// browser worker → CDP) and directly over CDP with chromedp, on the same
// pages, with the same Chromium executable and flags. It prints one table:
// per-tool latency, scenario throughput with 1 and N clients, a snapshot of
// a page with 500 interactive elements, and memory per idle session.
//
// Usage: go run ./e2e/cmd/bench [-mode fleet|up] [-n 200] [-duration 8s] …
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

type config struct {
	mode      string
	n         int
	warmup    int
	duration  time.Duration
	clients   int
	snapN     int
	snapElems int
	idle      int
	timeout   time.Duration
	verbose   bool
	only      string
	warm      int
	corpus    string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", "fleet", "chain under test: fleet (nats-server, gateway and worker as separate processes) or up (one `sovereign up` process, embedded NATS)")
	flag.IntVar(&cfg.n, "n", 200, "measured calls per tool for the latency table")
	flag.IntVar(&cfg.warmup, "warmup", 20, "unmeasured calls before each measurement")
	flag.DurationVar(&cfg.duration, "duration", 8*time.Second, "length of each throughput run")
	flag.IntVar(&cfg.clients, "clients", 8, "concurrent MCP clients (and direct tabs) in the concurrent throughput run")
	flag.IntVar(&cfg.snapN, "snapshot-n", 30, "measured snapshots of the large page")
	flag.IntVar(&cfg.snapElems, "snapshot-elements", 500, "interactive elements on the large page")
	flag.IntVar(&cfg.idle, "idle", 10, "idle sessions opened to measure memory per session")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "bound of the whole run")
	flag.BoolVar(&cfg.verbose, "v", false, "stream the output of the fleet's processes to stderr")
	flag.IntVar(&cfg.warm, "warm-sessions", 8, "the workers' --warm-sessions (warm browser contexts each keeps ready); 0: the workers' default, min(2, --max-sessions)")
	flag.StringVar(&cfg.only, "only", "", "sessions: measure only the session figures (first tool call of new sessions, placement spread); throughput: only the scenario throughput and its CPU split; skipping the rest")
	flag.StringVar(&cfg.corpus, "corpus", "on", "the compatibility corpus side by side with Playwright MCP: on, off or only (skip the other measurements)")
	flag.Parse()
	if cfg.corpus != "on" && cfg.corpus != "off" && cfg.corpus != "only" {
		fmt.Fprintf(os.Stderr, "bench: -corpus %q: want on, off or only\n", cfg.corpus)
		os.Exit(2)
	}
	if cfg.mode != "fleet" && cfg.mode != "up" {
		fmt.Fprintf(os.Stderr, "bench: -mode %q: want fleet or up\n", cfg.mode)
		os.Exit(2)
	}
	if cfg.n < 1 || cfg.clients < 1 || cfg.snapN < 1 || cfg.idle < 1 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -n, -clients, -snapshot-n, -idle and -duration must be positive")
		os.Exit(2)
	}

	// The workers keep session checkpoints (restore, spread.go) only with
	// the operator secret key: a throwaway one.
	if os.Getenv("SOVEREIGN_SECRET_KEY") == "" && os.Getenv("SOVEREIGN_SECRET_KEY_FILE") == "" {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		os.Setenv("SOVEREIGN_SECRET_KEY", hex.EncodeToString(key))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// unlimited lifts the per-caller session limit: every bench client is the
// one anonymous caller.
var unlimited = []string{"--sessions-per-caller", "1000"}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...)
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	started := time.Now()
	tmp, err := os.MkdirTemp("", "sovereign-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	logf("building sovereign and nats-server…")
	bins, err := harness.Build(ctx, tmp)
	if err != nil {
		return err
	}
	site := harness.NewSite()
	defer site.Close()

	// The chain.
	f := harness.NewFleet(bins, tmp)
	if cfg.verbose {
		f.Tee = os.Stderr
	}
	defer func() {
		if err != nil && !cfg.verbose {
			fmt.Fprintf(os.Stderr, "output of the chain's processes:\n%s\n", f.Logs())
		}
		f.Close()
	}()
	maxSessions := cfg.clients + cfg.idle + 8
	warmArgs := []string{"--warm-sessions", fmt.Sprint(cfg.warm)}
	var gw *harness.Gateway
	var desc string
	switch cfg.mode {
	case "fleet":
		logf("starting nats-server, a worker and a gateway…")
		if _, err := f.StartNATS(ctx); err != nil {
			return err
		}
		if _, err := f.StartWorker(ctx, "bench-w1", maxSessions, warmArgs...); err != nil {
			return err
		}
		if gw, err = f.StartGateway(ctx, unlimited...); err != nil {
			return err
		}
		desc = "HTTP MCP client → gateway process → nats-server (loopback TCP) → worker process → CDP"
	case "up":
		logf("starting sovereign up…")
		if gw, err = f.StartUp(ctx, 1, maxSessions, append(warmArgs, unlimited...)...); err != nil {
			return err
		}
		desc = "HTTP MCP client → sovereign up (gateway → embedded NATS → worker, one process) → CDP"
	}
	worker := f.Workers[0]
	chrome, err := harness.FindChromium(worker.PID())
	if err != nil {
		return fmt.Errorf("the worker's Chromium: %w", err)
	}

	// The direct side: the same executable and flags as the worker's Chromium.
	logf("starting the direct Chromium (%s, %d flags copied from the worker's)…", chrome.Exe, len(chrome.Args))
	direct, err := startDirect(ctx, chrome)
	if err != nil {
		return err
	}
	defer direct.close()

	r := &report{cfg: cfg, desc: desc, chrome: chrome.Exe, flags: direct.flags}
	// The throughput runs split their CPU time per op over the processes.
	client := cpuPart{name: "the client (this process: the MCP clients, or chromedp)", pid: os.Getpid()}
	chainCPU := []cpuPart{client}
	if cfg.mode == "fleet" {
		chainCPU = append(chainCPU, cpuPart{name: "gateway", pid: gw.PID()},
			cpuPart{name: "nats-server", pid: f.NATS.PID()}, cpuPart{name: "worker (its Go process)", pid: worker.PID()})
	} else {
		chainCPU = append(chainCPU, cpuPart{name: "sovereign up (gateway, NATS, worker)", pid: gw.PID()})
	}
	chromeCPU := "Chromium (all its processes)"
	chainCPU = append(chainCPU, cpuPart{name: chromeCPU, pid: chrome.PID, tree: true})
	directCPU := []cpuPart{client, {name: chromeCPU, pid: direct.pid, tree: true}}
	if cfg.only == "throughput" {
		logf("scenario throughput (%s per run)…", cfg.duration)
		if err := measureThroughput(ctx, cfg, gw.MCP, site.URL, direct, chainCPU, directCPU, r); err != nil {
			return err
		}
		r.printThroughput(out)
		return nil
	}
	if cfg.only == "sessions" {
		logf("first tool call of new sessions, 1 and 8 at once…")
		if err := measureFirstCall(ctx, gw.MCP, site.URL, r); err != nil {
			return err
		}
		if cfg.mode == "fleet" {
			logf("placement spread over three workers…")
			if err := measureSpread(ctx, f, gw.MCP, site.URL, maxSessions, r); err != nil {
				return err
			}
			logf("a worker killed under sessions, restored from checkpoints…")
			if err := measureRestore(ctx, f, gw.MCP, site.URL, r); err != nil {
				return err
			}
		}
		r.elapsed = time.Since(started)
		r.printStarts(out)
		r.printSpread(out)
		r.printRestore(out)
		return nil
	}
	if cfg.corpus == "only" {
		logf("compatibility corpus: Sovereign, then Playwright MCP…")
		rows, err := measureCorpus(ctx, gw.MCP)
		printCorpus(out, rows)
		return err
	}

	logf("per-tool latency (%d calls each)…", cfg.n)
	if err := measureTools(ctx, cfg, gw.MCP, site.URL, direct, r); err != nil {
		return err
	}
	logf("where the time goes…")
	if err := measureBreakdown(ctx, cfg, f, gw.MCP, site.URL, r); err != nil {
		return err
	}
	logf("first tool call of new sessions, 1 and 8 at once…")
	if err := measureFirstCall(ctx, gw.MCP, site.URL, r); err != nil {
		return err
	}
	logf("scenario throughput (%s per run)…", cfg.duration)
	if err := measureThroughput(ctx, cfg, gw.MCP, site.URL, direct, chainCPU, directCPU, r); err != nil {
		return err
	}
	logf("the TypeScript SDK client side by side with Playwright MCP (%s per run)…", cfg.duration)
	pwCLI, err := harness.PlaywrightCLI()
	if err != nil {
		return err
	}
	if err := measurePeer(ctx, cfg, gw.MCP, site.URL, pwCLI, r); err != nil {
		return err
	}
	logf("snapshot of a page with %d interactive elements…", cfg.snapElems)
	if err := measureBigSnapshot(ctx, cfg, gw.MCP, site.URL, direct, r); err != nil {
		return err
	}
	logf("memory per session (%d sessions, idle then each on a 2,000-element page)…", cfg.idle)
	if err := measureMemory(ctx, cfg, gw.MCP, site.URL, worker.PID(), r); err != nil {
		return err
	}
	if cfg.mode == "fleet" { // last: the other figures are of one worker
		logf("placement spread over three workers…")
		if err := measureSpread(ctx, f, gw.MCP, site.URL, maxSessions, r); err != nil {
			return err
		}
		logf("a worker killed under sessions, restored from checkpoints…")
		if err := measureRestore(ctx, f, gw.MCP, site.URL, r); err != nil {
			return err
		}
	}
	var rows []corpusRow
	if cfg.corpus == "on" {
		logf("compatibility corpus: Sovereign, then Playwright MCP…")
		if rows, err = measureCorpus(ctx, gw.MCP); err != nil {
			logf("corpus: %v", err)
		}
	}
	r.elapsed = time.Since(started)
	r.print(out)
	printCorpus(out, rows)
	return nil
}

// errTimeout is returned when the run's bound passes mid-measurement.
var errTimeout = errors.New("the run's -timeout passed")

func machine() string {
	return fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}
