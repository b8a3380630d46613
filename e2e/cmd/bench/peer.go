package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// The side-by-side run with the official TypeScript MCP client
// (e2e/client-ts/throughput.mjs): the loop snapshot → click → fill →
// get_text on the form page, with 1 and N clients, through Sovereign's
// gateway and through Playwright MCP (one process per client over stdio,
// its deployment model, on chromium-headless-shell).

// Targets of the side-by-side run: Sovereign's calls per second over
// Playwright MCP's.
const (
	targetPeerOne  = 3.0 // one client
	targetPeerMany = 4.0 // N clients
)

type peerRow struct {
	clients        int
	sovereign, pwm float64 // ops/s
}

// playwrightArgs are the arguments Playwright MCP runs with, as the issue
// that set the target asks (--no-sandbox: the bench runs as root, like the
// worker's Chromium).
func playwrightArgs() []string {
	return []string{"--isolated", "--headless", "--timeout-settle", "0", "--no-sandbox",
		"--executable-path", "/usr/lib/chromium/chromium-headless-shell"}
}

// measurePeer runs the loop through both servers; pwCLI is Playwright
// MCP's cli.js.
func measurePeer(ctx context.Context, cfg config, url, site, pwCLI string, r *report) error {
	dir, err := clientTSDir()
	if err != nil {
		return err
	}
	secs := max(int(cfg.duration.Seconds()), 1)
	for _, n := range []int{1, cfg.clients} {
		row := peerRow{clients: n}
		if row.sovereign, err = runThroughput(ctx, dir, secs, "sovereign", url, site+"/form", n); err != nil {
			return fmt.Errorf("sovereign, %d clients: %w", n, err)
		}
		// Its snapshot and console files go to a folder of their own.
		out, err := os.MkdirTemp("", "sovereign-bench-playwright-")
		if err != nil {
			return err
		}
		row.pwm, err = runThroughput(ctx, dir, secs, "playwright", pwCLI, site+"/form", n, append(playwrightArgs(), "--output-dir", out)...)
		os.RemoveAll(out)
		if err != nil {
			return fmt.Errorf("playwright MCP, %d clients: %w", n, err)
		}
		r.peer = append(r.peer, row)
	}
	return nil
}

// runThroughput runs throughput.mjs once and returns its calls per second.
func runThroughput(ctx context.Context, dir string, secs int, kind, target, page string, clients int, extra ...string) (float64, error) {
	args := append([]string{"throughput.mjs", kind, target, page, fmt.Sprint(clients), fmt.Sprint(secs)}, extra...)
	cctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res struct {
		OK      bool    `json:"ok"`
		OpsPerS float64 `json:"ops_per_s"`
		Error   string  `json:"error"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		return 0, fmt.Errorf("throughput.mjs: %v (%v); stderr: %s", err, jerr, stderr.String())
	}
	if !res.OK {
		return 0, errors.New(res.Error)
	}
	return res.OpsPerS, nil
}

// clientTSDir is e2e/client-ts with its Node packages installed (make deps
// installs them).
func clientTSDir() (string, error) {
	dir, err := filepath.Abs("e2e/client-ts")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		return "", fmt.Errorf("the TypeScript SDK is not installed in %s: run make deps (npm ci there)", dir)
	}
	return dir, nil
}

func (r *report) printPeer(out io.Writer) {
	if len(r.peer) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "TypeScript SDK client, %s each\tSovereign ops/s\tPlaywright MCP ops/s\tratio\ttarget\t\n", r.cfg.duration)
	for _, p := range r.peer {
		ratio := p.sovereign / max(p.pwm, 0.001)
		want := targetPeerMany
		who := fmt.Sprintf("%d clients", p.clients)
		if p.clients == 1 {
			want, who = targetPeerOne, "1 client"
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1fx\t≥ %.0fx: %s\t\n", who, p.sovereign, p.pwm, ratio, want, verdict(ratio >= want))
	}
	w.Flush()
	fmt.Fprintln(out, "  one op = one tool call of the loop snapshot → click → fill → get_text on the form page (e2e/client-ts/throughput.mjs);")
	fmt.Fprintln(out, "  Playwright MCP: one stdio process per client, "+strings.Join(playwrightArgs(), " "))
}
