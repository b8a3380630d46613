package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// Targets the figures are held against.
const (
	targetAddedP50    = time.Millisecond // get_title and eval: chain p50 − direct p50
	targetThroughput  = 0.70             // N-client scenario: chain / direct
	targetBigSnapshot = 50 * time.Millisecond
)

type report struct {
	cfg     config
	desc    string
	chrome  string
	flags   []string
	elapsed time.Duration

	tools      []toolRow
	breakdown  []breakdownRow
	cpuPerCall time.Duration // CPU the gateway (fleet) or the sovereign process (up) spent per get_title
	throughput []throughputRow
	peer       []peerRow // the TypeScript SDK side by side with Playwright MCP (peer.go)

	bigChain, bigDirect         stats
	bigChainRefs, bigDirectRefs int

	memBefore, memAfter harness.Memory
	memLoaded           harness.Memory // memAfter's sessions, each with a 2,000-element page open

	starts  []startRow  // first tool call of a new session (start.go)
	spread  []spreadRow // sessions per worker after 24 opens (spread.go)
	restore *restoreRow // a worker killed under sessions (spread.go)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func (r *report) print(out io.Writer) {
	cfg := r.cfg
	fmt.Fprintf(out, "\nSovereign bench — %s, %s\n", machine(), time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(out, "chain:  %s\n", r.desc)
	fmt.Fprintf(out, "direct: chromedp → CDP on a Chromium started with the worker's executable and flags (%s, %d flags)\n", r.chrome, len(r.flags))
	fmt.Fprintf(out, "        each client/tab has its own browser context; pages served by httptest on loopback\n\n")

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "per-tool latency (n=%d)\tchain p50\tchain p95\tdirect p50\tdirect p95\tadded p50\tratio p50\ttarget\t\n", cfg.n)
	for _, t := range r.tools {
		added := t.chain.p50 - t.direct.p50
		target := ""
		if t.tool == "get_title" || t.tool == "eval" {
			target = fmt.Sprintf("added ≤ %s: %s", ms(targetAddedP50), verdict(added <= targetAddedP50))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%.1fx\t%s\t\n", t.tool, ms(t.chain.p50), ms(t.chain.p95),
			ms(t.direct.p50), ms(t.direct.p95), ms(added), float64(t.chain.p50)/float64(max(t.direct.p50, 1)), target)
	}
	w.Flush()
	fmt.Fprintln(out, "  direct equivalents: get_title = chromedp.Title; eval = Runtime.evaluate; snapshot = Accessibility.getFullAXTree")
	fmt.Fprintln(out, "  rendered as ARIA YAML with refs; click = mouse click on a resolved node; fill = focus, set value, input/change events")

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "where the time goes (n=%d)\tp50\tp95\t\n", cfg.n)
	for _, t := range r.tools {
		if t.tool == "get_title" || t.tool == "eval" {
			fmt.Fprintf(w, "%s direct over CDP\t%s\t%s\t\n", t.tool, ms(t.direct.p50), ms(t.direct.p95))
		}
	}
	for _, b := range r.breakdown {
		fmt.Fprintf(w, "%s\t%s\t%s\t\n", b.what, ms(b.s.p50), ms(b.s.p95))
	}
	for _, t := range r.tools {
		if t.tool == "get_title" || t.tool == "eval" {
			fmt.Fprintf(w, "%s through the whole chain\t%s\t%s\t\n", t.tool, ms(t.chain.p50), ms(t.chain.p95))
		}
	}
	w.Flush()
	who := "the gateway process"
	if cfg.mode == "up" {
		who = "the sovereign up process (gateway, NATS and worker; not Chromium)"
	}
	fmt.Fprintf(out, "  CPU time of %s per get_title through MCP: %s (mean of %d calls; CPU time, unlike latency, hardly moves with the machine's load)\n",
		who, ms(r.cpuPerCall), cfg.n)

	r.printThroughput(out)
	r.printPeer(out)
	r.printStarts(out)

	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "snapshot, %d interactive elements (n=%d)\tp50\tp95\trefs\ttarget\t\n", cfg.snapElems, cfg.snapN)
	fmt.Fprintf(w, "chain\t%s\t%s\t%d\t< %s: %s\t\n", ms(r.bigChain.p50), ms(r.bigChain.p95), r.bigChainRefs,
		ms(targetBigSnapshot), verdict(r.bigChain.p50 < targetBigSnapshot))
	fmt.Fprintf(w, "direct\t%s\t%s\t%d\t\t\n", ms(r.bigDirect.p50), ms(r.bigDirect.p95), r.bigDirectRefs)
	w.Flush()

	fmt.Fprintln(out)
	k := int64(cfg.idle)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "memory, worker + Chromium tree\tprocs\tRSS\tPSS\t\n")
	fmt.Fprintf(w, "before\t%d\t%s\t%s\t\n", r.memBefore.Procs, mib(r.memBefore.RSS), mib(r.memBefore.PSS))
	fmt.Fprintf(w, "with %d more idle sessions\t%d\t%s\t%s\t\n", k, r.memAfter.Procs, mib(r.memAfter.RSS), mib(r.memAfter.PSS))
	fmt.Fprintf(w, "per idle session\t\t%s\t%s\t\n", mib((r.memAfter.RSS-r.memBefore.RSS)/k), mib((r.memAfter.PSS-r.memBefore.PSS)/k))
	fmt.Fprintf(w, "the same sessions, each on a 2,000-element page\t%d\t%s\t%s\t\n", r.memLoaded.Procs, mib(r.memLoaded.RSS), mib(r.memLoaded.PSS))
	fmt.Fprintf(w, "per session with that page\t\t%s\t%s\t\n", mib((r.memLoaded.RSS-r.memBefore.RSS)/k), mib((r.memLoaded.PSS-r.memBefore.PSS)/k))
	w.Flush()
	fmt.Fprintln(out, "  an idle session is a browser context with one about:blank tab; PSS splits shared pages, RSS counts them per process")
	if r.cfg.mode == "up" {
		fmt.Fprintln(out, "  (mode up: the tree is the whole sovereign up process, gateway and NATS included)")
	}
	r.printSpread(out)
	r.printRestore(out)
	fmt.Fprintf(out, "\nflags of both Chromiums: %s\n", strings.Join(r.flags, " "))
	fmt.Fprintf(out, "bench ran %s\n", r.elapsed.Round(time.Second))
}

// printThroughput prints the scenario throughput, then where the CPU went
// per op in the run with the most clients.
func (r *report) printThroughput(out io.Writer) {
	cfg := r.cfg
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "scenario throughput (%s each)\tchain ops/s\tdirect ops/s\tchain/direct\ttarget\t\n", cfg.duration)
	for _, t := range r.throughput {
		ratio := t.chain / t.direct
		target := ""
		if t.clients == cfg.clients && t.clients > 1 {
			target = fmt.Sprintf("≥ %.0f%%: %s", targetThroughput*100, verdict(ratio >= targetThroughput))
		}
		who := "1 client / 1 tab"
		if t.clients > 1 {
			who = fmt.Sprintf("%d clients / %d tabs", t.clients, t.clients)
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.0f%%\t%s\t\n", who, t.chain, t.direct, ratio*100, target)
	}
	w.Flush()
	fmt.Fprintln(out, "  one op = one tool call of the loop snapshot → click → fill → get_text on the form page")
	if len(r.throughput) == 0 {
		return
	}
	t := r.throughput[len(r.throughput)-1]
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "CPU time per op, %d clients\tchain\tdirect\t\n", t.clients)
	direct := map[string]time.Duration{}
	for _, c := range t.directCPU {
		direct[c.name] = c.perOp
	}
	var sumChain, sumDirect time.Duration
	for _, c := range t.chainCPU {
		d, ok := direct[c.name]
		ds := "-"
		if ok {
			ds = ms(d)
			sumDirect += d
		}
		sumChain += c.perOp
		fmt.Fprintf(w, "%s\t%s\t%s\t\n", c.name, ms(c.perOp), ds)
	}
	fmt.Fprintf(w, "total\t%s\t%s\t\n", ms(sumChain), ms(sumDirect))
	w.Flush()
	fmt.Fprintf(out, "  from /proc (user + system, 10 ms ticks) over each run; %d CPUs give %.0f ops/s at most at the chain's total\n",
		runtime.NumCPU(), float64(runtime.NumCPU())*float64(time.Second)/float64(max(sumChain, 1)))
}
