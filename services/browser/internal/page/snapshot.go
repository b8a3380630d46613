package page

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/types/known/structpb"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
)

// frameMark starts the line where page.js wants the snapshot of a child
// frame; the rest of the line is the index of the frame's element among
// the frame elements passed to it.
const frameMark = "\x01"

// refInfo is what the ref map says about one ref.
type refInfo struct {
	Role string `json:"role"`
	Name string `json:"name"`
}

// frameSnap is the result of page.js's snapshot for one frame.
type frameSnap struct {
	Text  string `json:"text"`
	Next  int64  `json:"next"`
	Title string `json:"title"`
	// Stopped says that the walk ended early: "time" (the deadline) or
	// "size" (enough elements for the cap); Missing that the root ref
	// is gone.
	Stopped string `json:"stopped"`
	Missing bool   `json:"missing"`
}

// snapOpts are the options that page.js's snapshot takes.
type snapOpts struct {
	Interactive bool   `json:"interactive"`
	Compact     bool   `json:"compact"`
	Prefix      string `json:"prefix"`
	// Root is the ref number of the element whose subtree to show (0: the
	// whole document).
	Root int64 `json:"root,omitempty"`
	// Deadline is how long the walk may take in ms (0: no limit);
	// MaxNodes how many elements it keeps; MaxRun how many rows, list
	// items or tree items of one container it shows (0: all).
	Deadline float64 `json:"deadline,omitempty"`
	MaxNodes int     `json:"maxNodes,omitempty"`
	MaxRun   int     `json:"maxRun,omitempty"`
}

// readingHandlers are the tools that read the page (element.go,
// styles.go, eval.go, screenshot.go).
var readingHandlers = map[string]handler{
	"snapshot": on((*browserv1.ToolRequest).GetSnapshot, (*Tab).snapshot),
	"get_text": on((*browserv1.ToolRequest).GetGetText, (*Tab).getText),
	"get_html": on((*browserv1.ToolRequest).GetGetHtml, (*Tab).getHTML),
	"get_attr": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return t.getAttr(ctx, r.GetGetAttr().GetElement(), r.GetGetAttr().GetAttr())
	},
	"get_styles": on((*browserv1.ToolRequest).GetGetStyles, (*Tab).getStyles),
	"eval": func(t *Tab, ctx context.Context, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		if el := r.GetEval().GetElement(); el != nil {
			return t.evalOn(ctx, el, r.GetEval().GetScript())
		}
		return t.eval(ctx, r.GetEval().GetScript())
	},
	"screenshot": on((*browserv1.ToolRequest).GetScreenshot, (*Tab).screenshot),
}

// snapshot returns the ARIA-YAML tree of the page and its frames (or of
// the element req.ref), with refs, cut at the call's character cap, and
// the ref map as structured content. A huge page stops the walk at the
// request's soft deadline: the result says it is partial.
func (t *Tab) snapshot(ctx context.Context, req *browserv1.Snapshot) (*browserv1.ToolResult, error) {
	interactive, compact := req.GetInteractive(), req.GetCompact()
	tree, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return nil, err
	}
	root := tree.FrameTree
	t.frames.setMain(root.Frame.ID)
	maxChars := t.capChars(DefaultSnapshotChars)
	opts := snapOpts{Interactive: interactive, Compact: compact, MaxNodes: int(float64(maxChars)*snapshotNodesPerChar) + 200,
		MaxRun: max(int(float64(maxChars)*snapshotRunPerChar), 10)}
	find := req.GetFind()
	var match func(string) bool
	if find != "" {
		// find searches the whole tree, not only what max_chars would show.
		if match, err = findMatcher(find); err != nil {
			return nil, err
		}
		interactive, opts.Interactive, opts.MaxNodes, opts.MaxRun = false, false, findMaxNodes, 0
	}
	start := root
	if r := strings.TrimSpace(req.GetRef()); r != "" {
		num, n, err := parseRef(r)
		if err != nil {
			return nil, err
		}
		fid, ok := t.frames.byNum(num)
		if ft := findFrame(root, fid); ok && ft != nil {
			start, opts.Root, opts.MaxRun = ft, n, 0
		} else {
			return nil, staleRef(cleanRef(r))
		}
	}
	refs := map[string]refInfo{}
	// The walks have until the soft deadline, less what the rest needs.
	st := snapState{until: time.Now().Add(time.Until(softDeadline(ctx, 0)) * 8 / 10)}
	lines, title, err := t.snapFrame(ctx, start, opts, refs, &st)
	if err != nil {
		return nil, err
	}
	if st.missing {
		return nil, staleRef(cleanRef(req.GetRef()))
	}
	if opts.Root == 0 && interactive && compact {
		t.lastSnap = lines
	}
	if match != nil {
		lines = findLines(lines, match, find)
	}
	text, cut := cutLines(lines, maxChars)
	if st.stopped == "time" {
		text += "\n[the page is too large to snapshot before the request deadline: this is only its start; take snapshot with ref=<a ref above> to see one part]"
	} else if st.stopped == "size" && !cut {
		text += fmt.Sprintf("\n[snapshot stopped after %d elements (max_chars=%d); take snapshot with ref=<a ref above> or a larger max_chars to see the rest]", opts.MaxNodes, maxChars)
	}
	if len(lines) == 0 {
		text = "(the page shows nothing)"
		if match != nil {
			text = fmt.Sprintf("(nothing on the page matches find %q)", clipTo(find, 200))
		} else if interactive {
			text = "(no interactive elements; take a snapshot with interactive=false to see all content)"
		}
	}
	u := root.Frame.URL + root.Frame.URLFragment
	t.mu.Lock()
	t.seen = pageSeen{url: u, title: title}
	t.mu.Unlock()
	// The ref map is the biggest structured content a tool makes (a
	// thousand refs on a big page): built as the message directly.
	refMap := make(map[string]*structpb.Value, len(refs))
	for ref, info := range refs {
		refMap[ref] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"role": structpb.NewStringValue(info.Role), "name": structpb.NewStringValue(info.Name)}})
	}
	out := &structpb.Struct{Fields: map[string]*structpb.Value{
		"url":   structpb.NewStringValue(clipTo(u, maxURL)),
		"title": structpb.NewStringValue(title),
		"refs":  structpb.NewStructValue(&structpb.Struct{Fields: refMap}),
	}}
	if cut || st.stopped != "" {
		out.Fields["truncated"] = structpb.NewBoolValue(true)
	}
	return &browserv1.ToolResult{Content: []*browserv1.Content{textContent(text)}, Structured: out}, nil
}

// snapState is what the walks of one snapshot report beyond their lines.
type snapState struct {
	until   time.Time
	stopped string
	missing bool
}

// findFrame returns the frame id in the tree ft, or nil.
func findFrame(ft *page.FrameTree, id cdp.FrameID) *page.FrameTree {
	if ft.Frame.ID == id {
		return ft
	}
	for _, c := range ft.ChildFrames {
		if f := findFrame(c, id); f != nil {
			return f
		}
	}
	return nil
}

// snapFrame snapshots one frame in one call of page.js, then the child
// frames whose elements it showed, and puts their lines under those
// elements. It adds the refs it saw to refs.
func (t *Tab) snapFrame(ctx context.Context, ft *page.FrameTree, opts snapOpts, refs map[string]refInfo, st *snapState) (lines []string, title string, err error) {
	num := t.frames.num(ft.Frame.ID)
	ctx, span := startSpan(ctx, spanSnapshot, attribute.Int("sovereign.frame", num),
		attribute.Int("sovereign.frame.children", len(ft.ChildFrames)))
	known := len(refs)
	defer func() {
		// With the frames nested in this one.
		span.SetAttributes(attribute.Int("sovereign.snapshot.lines", len(lines)), attribute.Int("sovereign.snapshot.refs", len(refs)-known))
		endSpan(span, err)
	}()
	opts.Prefix = ""
	if num > 0 {
		opts.Prefix = "f" + strconv.Itoa(num)
	}
	var snap frameSnap
	err = t.frames.inWorld(ctx, ft.Frame.ID, func(world runtime.ExecutionContextID) error {
		opts.Deadline = max(float64(time.Until(st.until).Milliseconds()), 1)
		snap, err = jsSnapshot(ctx, world, opts, t.frameOwners(ctx, ft, world))
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("snapshot frame %s: %w", clipText(ft.Frame.URL), err)
	}
	t.frames.noteNext(num, snap.Next)
	if snap.Missing {
		st.missing = true
	}
	if snap.Stopped != "" && st.stopped != "time" {
		st.stopped = snap.Stopped
	}
	span.SetAttributes(attribute.Int("sovereign.snapshot.size", len(snap.Text)))
	if snap.Text == "" {
		return nil, snap.Title, nil
	}
	split := strings.Split(snap.Text, "\n")
	out := make([]string, 0, len(split))
	for _, line := range split {
		indent, rest, found := strings.Cut(line, frameMark)
		if !found || strings.TrimLeft(indent, " ") != "" {
			if r, info, ok := lineRef(line); ok {
				refs[r] = info
			}
			out = append(out, line)
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 0 || i >= len(ft.ChildFrames) {
			continue
		}
		child, _, err := t.snapFrame(ctx, ft.ChildFrames[i], snapOpts{Interactive: opts.Interactive, Compact: opts.Compact,
			MaxNodes: opts.MaxNodes, MaxRun: opts.MaxRun}, refs, st)
		if err != nil || len(child) == 0 {
			// Say that the frame is there but shows nothing: the
			// line of its element ends with ":" for children.
			if n := len(out); n > 0 {
				out[n-1] = strings.TrimSuffix(out[n-1], ":")
			}
			continue
		}
		for _, c := range child {
			out = append(out, indent+c)
		}
	}
	return out, snap.Title, nil
}

// frameOwners returns, for each child frame of ft, its iframe element in
// world as a call argument, or null when it cannot be found.
func (t *Tab) frameOwners(ctx context.Context, ft *page.FrameTree, world runtime.ExecutionContextID) []*runtime.CallArgument {
	args := make([]*runtime.CallArgument, 0, len(ft.ChildFrames))
	for _, c := range ft.ChildFrames {
		args = append(args, t.frameOwner(ctx, c.Frame.ID, world))
	}
	return args
}

// frameOwner returns the iframe element of frame in world as a call
// argument, or null.
func (t *Tab) frameOwner(ctx context.Context, frame cdp.FrameID, world runtime.ExecutionContextID) *runtime.CallArgument {
	null := &runtime.CallArgument{Value: []byte("null")}
	own, err := chromedp.Call(ctx, dom.GetFrameOwner, dom.GetFrameOwnerParams{FrameID: frame})
	if err != nil || own.BackendNodeID == 0 {
		return null
	}
	obj, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{
		BackendNodeID:      own.BackendNodeID,
		ExecutionContextID: world,
		ObjectGroup:        objectGroup,
	})
	if err != nil || obj.Object == nil || obj.Object.ObjectID == "" {
		return null
	}
	t.madeObjects = true
	return &runtime.CallArgument{ObjectID: obj.Object.ObjectID}
}

// lineRef reads the ref, role and name of a snapshot line such as
// `- button "Save" [disabled] [ref=e5]: value`. The name is a JSON string, so a name with brackets does not confuse it.
func lineRef(line string) (string, refInfo, bool) {
	s, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "- ")
	if !ok {
		return "", refInfo{}, false
	}
	var info refInfo
	end := strings.IndexAny(s, " :")
	if end < 0 {
		return "", refInfo{}, false
	}
	info.Role, s = s[:end], s[end:]
	if strings.HasPrefix(s, ` "`) {
		n := quotedLen(s[1:])
		if n < 0 || json.Unmarshal([]byte(s[1:1+n]), &info.Name) != nil {
			return "", refInfo{}, false
		}
		s = s[1+n:]
	}
	for strings.HasPrefix(s, " [") {
		attr, rest, ok := strings.Cut(s[2:], "]")
		if !ok {
			break
		}
		if r, isRef := strings.CutPrefix(attr, "ref="); isRef {
			return r, info, true
		}
		s = rest
	}
	return "", refInfo{}, false
}

// quotedLen returns the length of the JSON string at the start of s,
// quotes included, or -1.
func quotedLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}
