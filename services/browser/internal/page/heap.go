package page

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/chromedp"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// heapTopShown is how many constructors heap_snapshot lists.
const heapTopShown = 15

// heapSnapshot is the heap_snapshot tool: V8's heap snapshot of the page
// (HeapProfiler.takeHeapSnapshot, which collects garbage first), summed
// up by constructor, and the snapshot gzipped as heap.heapsnapshot.gz.
func (p *perfTools) heapSnapshot(ctx context.Context) (*browserv1.ToolResult, error) {
	max := p.tab.opts.maxProfileReadBytes()
	var (
		mu   sync.Mutex
		raw  bytes.Buffer
		over bool
	)
	// The chunks come as events before the command's reply, on the
	// goroutine that reads the browser's messages, in order: once the call
	// returns, the listener has seen them all.
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := chromedp.Listen(lctx, func(ev any) {
		c, ok := ev.(*heapprofiler.EventAddHeapSnapshotChunk)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if over || raw.Len()+len(c.Chunk) > max {
			over = true
			raw.Reset()
			return
		}
		raw.WriteString(c.Chunk)
	}); err != nil {
		return nil, fmt.Errorf("listen for the heap snapshot: %w", err)
	}
	if _, err := chromedp.Call(ctx, heapprofiler.Enable, cdp.Empty{}); err != nil {
		return nil, fmt.Errorf("enable the heap profiler: %w", err)
	}
	defer func() { _, _ = chromedp.Call(ctx, heapprofiler.Disable, cdp.Empty{}) }()
	if _, err := chromedp.Call(ctx, heapprofiler.TakeHeapSnapshot, heapprofiler.TakeHeapSnapshotParams{ReportProgress: new(false)}); err != nil {
		return nil, fmt.Errorf("take the heap snapshot: %w", err)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if over {
		return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE,
			"the heap snapshot is larger than the limit of %d bytes (the worker's --max-profile-read-mb); the page holds too much memory to snapshot here", max)
	}
	sum, err := summarizeHeap(raw.Bytes())
	if err != nil {
		return nil, err
	}
	zipped, err := gzipCapped(raw.Bytes(), p.tab.opts.maxProfileFileBytes())
	if err != nil {
		return nil, fmt.Errorf("compress the heap snapshot: %w", err)
	}
	u, _ := p.tab.currentURL(ctx)
	text := fmt.Sprintf("Heap snapshot of %s: %s in %d objects (self sizes).\n%s", clipTo(u, maxURL), fmtBytes(sum.TotalBytes), sum.Nodes, sum.text())
	if zipped.over {
		text += fmt.Sprintf("\nThe snapshot file is not attached: gzipped it is larger than the limit of %d bytes (--max-profile-file-mb).", zipped.max)
	} else {
		text += fmt.Sprintf("\nThe snapshot (%d bytes, %d gzipped) is attached as heap.heapsnapshot.gz: gunzip it and load it in Chrome DevTools' Memory panel.", raw.Len(), zipped.Len())
	}
	res := textResult("%s", text)
	if !zipped.over {
		res.Content = append(res.Content, resourcePart("heap.heapsnapshot.gz", "application/gzip", zipped.Bytes()))
	}
	SetStructured(res, "heap", sum)
	return res, nil
}

// gzipCapped returns data gzipped, or a buffer that says it is over max.
func gzipCapped(data []byte, max int) (*cappedBuffer, error) {
	out := &cappedBuffer{max: max}
	zw := gzip.NewWriter(out)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	return out, zw.Close()
}

// heapGroup is the objects of one constructor (or one kind of V8
// internal, in parentheses, as DevTools' Summary view shows them).
type heapGroup struct {
	Name      string `json:"name"`
	Count     int    `json:"count"`
	SelfBytes int64  `json:"self_bytes"`
}

// heapSummary is what heap_snapshot says about a snapshot.
type heapSummary struct {
	TotalBytes int64       `json:"total_bytes"`
	Nodes      int         `json:"nodes"`
	Groups     int         `json:"constructors"`
	Top        []heapGroup `json:"top"`
}

// summarizeHeap groups the nodes of a .heapsnapshot by constructor.
func summarizeHeap(raw []byte) (heapSummary, error) {
	var snap struct {
		Snapshot struct {
			Meta struct {
				NodeFields []string          `json:"node_fields"`
				NodeTypes  []json.RawMessage `json:"node_types"`
			} `json:"meta"`
		} `json:"snapshot"`
		Nodes   []int64  `json:"nodes"`
		Strings []string `json:"strings"`
	}
	if err := json.Unmarshal(raw, &snap); err != nil {
		return heapSummary{}, fmt.Errorf("read the heap snapshot: %w", err)
	}
	fields := snap.Snapshot.Meta.NodeFields
	typeAt, nameAt, sizeAt := slices.Index(fields, "type"), slices.Index(fields, "name"), slices.Index(fields, "self_size")
	var types []string
	if len(snap.Snapshot.Meta.NodeTypes) > 0 {
		_ = json.Unmarshal(snap.Snapshot.Meta.NodeTypes[0], &types)
	}
	if typeAt < 0 || nameAt < 0 || sizeAt < 0 || len(fields) == 0 || len(types) == 0 {
		return heapSummary{}, fmt.Errorf("read the heap snapshot: its meta has no node type, name or self_size field")
	}
	groups := map[string]*heapGroup{}
	var s heapSummary
	for i := 0; i+len(fields) <= len(snap.Nodes); i += len(fields) {
		typ, name, size := snap.Nodes[i+typeAt], snap.Nodes[i+nameAt], snap.Nodes[i+sizeAt]
		key := "(unknown)"
		if typ >= 0 && int(typ) < len(types) {
			key = "(" + types[typ] + ")"
			if (types[typ] == "object" || types[typ] == "native") && name >= 0 && int(name) < len(snap.Strings) {
				// A name the page chose: one line, bounded.
				key = clipTo(strings.Join(strings.Fields(snap.Strings[name]), " "), 100)
			}
		}
		g := groups[key]
		if g == nil {
			g = &heapGroup{Name: key}
			groups[key] = g
		}
		g.Count++
		g.SelfBytes += size
		s.TotalBytes += size
		s.Nodes++
	}
	all := make([]heapGroup, 0, len(groups))
	for _, g := range groups {
		all = append(all, *g)
	}
	slices.SortFunc(all, func(a, b heapGroup) int {
		return cmp.Or(cmp.Compare(b.SelfBytes, a.SelfBytes), cmp.Compare(a.Name, b.Name))
	})
	s.Groups = len(all)
	s.Top = all[:min(len(all), heapTopShown)]
	return s, nil
}

func (s heapSummary) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Top %d of %d constructors by self size:", len(s.Top), s.Groups)
	for _, g := range s.Top {
		fmt.Fprintf(&b, "\n- %s: %s in %d objects", g.Name, fmtBytes(g.SelfBytes), g.Count)
	}
	return b.String()
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
