package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// The corpus comparison: the todo task (harness.RunTodoTask) on every app
// of the compatibility corpus, through Sovereign's gateway and through
// Playwright MCP (the version pinned in e2e/corpus/package.json, run as
// the issue asks: --isolated --headless --timeout-settle 0, on Debian's
// chromium-headless-shell; --no-sandbox as well, since the bench runs as
// root as the worker's Chromium does).

// headlessShell is the Chromium Playwright MCP runs.
const headlessShell = "/usr/lib/chromium/chromium-headless-shell"

// corpusRow is one server's figures on the corpus.
type corpusRow struct {
	who       string
	tasks, ok int
	calls     int
	toolTime  time.Duration
	snapChars int
	chars     int
	steps     map[string]time.Duration
	failures  []string
}

// measureCorpus runs the task on every corpus app with both servers.
func measureCorpus(ctx context.Context, url string) ([]corpusRow, error) {
	dir, err := harness.CorpusDir()
	if err != nil {
		return nil, err
	}
	srv := harness.ServeCorpus(dir)
	defer srv.Close()

	sov := corpusRow{who: "Sovereign"}
	for _, app := range harness.CorpusApps {
		c := harness.NewMCPClient(url)
		if _, err := c.Initialize(ctx); err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
		// The browser session opens before the task, unmeasured, as
		// Playwright MCP's browser is up before its tasks (but the first).
		if _, err := c.Tool(ctx, "get_url", nil); err != nil {
			return nil, fmt.Errorf("open a browser session: %w", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := harness.RunTodoTask(tctx, harness.SovereignDriver{C: c}, srv.URL+"/"+app+"/index.html")
		cancel()
		_, _ = c.Delete(context.Background())
		sov.add(app, st, err)
	}

	pw, err := startPlaywright(ctx, dir)
	if err != nil {
		return []corpusRow{sov}, err
	}
	defer pw.close()
	row := corpusRow{who: "Playwright MCP " + pw.version}
	for _, app := range harness.CorpusApps {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := harness.RunTodoTask(tctx, pw, srv.URL+"/"+app+"/index.html")
		cancel()
		row.add(app, st, err)
	}
	return []corpusRow{sov, row}, nil
}

func (r *corpusRow) add(app string, st harness.TaskStats, err error) {
	r.tasks++
	if err != nil {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i > 0 {
			msg = msg[:i]
		}
		r.failures = append(r.failures, app+": "+msg)
		logf("corpus: %s: %s failed: %s", r.who, app, msg)
		return
	}
	r.ok++
	r.calls += st.Calls
	r.toolTime += st.ToolTime
	r.snapChars += st.SnapshotChars
	r.chars += st.ResultChars
	if r.steps == nil {
		r.steps = map[string]time.Duration{}
	}
	for k, v := range st.Steps {
		r.steps[k] += v
	}
}

// printCorpus prints the comparison: figures per passed task.
func printCorpus(out io.Writer, rows []corpusRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\ncompatibility corpus: %d TodoMVC apps (npm todomvc 0.1.1), task: add 3 todos, complete one, filter Completed\n", len(harness.CorpusApps))
	fmt.Fprintf(out, "  tool time is the sum of the task's calls as the client sees them; Sovereign's browser session is open before each task\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "server\tsuccess\tcalls/task\ttool time/task\tsnapshot chars/task\tresult chars/task\t\n")
	for _, r := range rows {
		n := max(r.ok, 1)
		fmt.Fprintf(w, "%s\t%d/%d (%.0f%%)\t%.1f\t%s\t%d\t%d\t\n", r.who, r.ok, r.tasks, 100*float64(r.ok)/float64(max(r.tasks, 1)),
			float64(r.calls)/float64(n), ms(r.toolTime/time.Duration(n)), r.snapChars/n, r.chars/n)
	}
	w.Flush()
	if len(rows) == 2 && rows[0].ok > 0 && rows[1].ok > 0 {
		a, b := rows[0], rows[1]
		timeRatio := (float64(b.toolTime) / float64(b.ok)) / (float64(a.toolTime) / float64(a.ok))
		charRatio := (float64(a.snapChars) / float64(a.ok)) / (float64(b.snapChars) / float64(b.ok))
		fmt.Fprintf(out, "  tool time: Playwright MCP / Sovereign = %.1fx (target ≥ 3x: %s); snapshot chars: Sovereign / Playwright MCP = %.0f%% (target ≤ 50%%: %s)\n",
			timeRatio, verdict(timeRatio >= 3), 100*charRatio, verdict(charRatio <= 0.5))
	}
	for _, r := range rows {
		n := time.Duration(max(r.ok, 1))
		fmt.Fprintf(out, "  %s tool time per task by step:", r.who)
		for _, k := range []string{"open", "snapshot", "add", "click", "eval"} {
			fmt.Fprintf(out, " %s %s", k, ms(r.steps[k]/n))
		}
		fmt.Fprintln(out)
	}
	for _, r := range rows {
		for _, f := range r.failures {
			fmt.Fprintf(out, "  %s failed %s\n", r.who, f)
		}
	}
}

// playwright drives Playwright MCP over stdio.
type playwright struct {
	c       *client.Client
	version string
	outDir  string
}

func (p *playwright) close() {
	p.c.Close()
	os.RemoveAll(p.outDir)
}

func startPlaywright(ctx context.Context, examples string) (*playwright, error) {
	cli, err := harness.PlaywrightCLI()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(headlessShell); err != nil {
		return nil, fmt.Errorf("the bench runs Playwright MCP on %s (apt-get install chromium-headless-shell): %w", headlessShell, err)
	}
	// Its console logs and other output files go to a temporary folder.
	outDir, err := os.MkdirTemp("", "sovereign-bench-playwright-")
	if err != nil {
		return nil, err
	}
	c, err := client.NewStdioMCPClient("node", nil, cli, "--isolated", "--headless", "--timeout-settle", "0", "--no-sandbox",
		"--executable-path", headlessShell, "--output-dir", outDir)
	if err != nil {
		return nil, fmt.Errorf("start Playwright MCP: %w", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "sovereign-bench", Version: "0.0.0"}
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := c.Initialize(ictx, req)
	if err != nil {
		c.Close()
		os.RemoveAll(outDir)
		return nil, fmt.Errorf("initialize Playwright MCP: %w", err)
	}
	return &playwright{c: c, version: res.ServerInfo.Version, outDir: outDir}, nil
}

// Name implements harness.Driver.
func (p *playwright) Name() string { return "playwright-mcp" }

func (p *playwright) call(ctx context.Context, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		return text, fmt.Errorf("%s: tool error: %s", name, strings.Join(strings.Fields(text[:min(len(text), 400)]), " "))
	}
	return text, nil
}

// Open implements harness.Driver.
func (p *playwright) Open(ctx context.Context, url string) (string, error) {
	return p.call(ctx, "browser_navigate", map[string]any{"url": url})
}

// Snapshot implements harness.Driver.
func (p *playwright) Snapshot(ctx context.Context) (string, error) {
	return p.call(ctx, "browser_snapshot", map[string]any{})
}

// Add implements harness.Driver: type with submit (Enter) in one call.
func (p *playwright) Add(ctx context.Context, ref, text string) (string, error) {
	return p.call(ctx, "browser_type", map[string]any{"element": "new todo field", "target": ref, "text": text, "submit": true})
}

// AddCalls implements harness.Driver: browser_type with submit.
func (p *playwright) AddCalls() int { return 1 }

// Click implements harness.Driver.
func (p *playwright) Click(ctx context.Context, ref string) (string, error) {
	return p.call(ctx, "browser_click", map[string]any{"element": "element " + ref, "target": ref})
}

// Eval implements harness.Driver: the "### Result" section of the answer
// (the rest echoes the code that ran).
func (p *playwright) Eval(ctx context.Context, fn string) (string, error) {
	out, err := p.call(ctx, "browser_evaluate", map[string]any{"function": fn})
	if err != nil {
		return out, err
	}
	if _, res, ok := strings.Cut(out, "### Result\n"); ok {
		res, _, _ = strings.Cut(res, "\n### ")
		return strings.TrimSpace(res), nil
	}
	return out, nil
}
