package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// directBrowser is the Chromium the bench drives itself over CDP.
type directBrowser struct {
	browser context.Context
	cancel  func()
	flags   []string // the flags copied from the worker's Chromium
	pid     int      // its browser process
}

// startDirect starts Chromium with the executable and flags of the worker's
// Chromium (minus its profile dir and debugging port, which chromedp sets),
// so the flag list stays in one place: services/browser/internal/chrome.
func startDirect(ctx context.Context, worker *harness.Chromium) (*directBrowser, error) {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(worker.Exe)}
	var flags []string
	for _, a := range worker.Args {
		if !strings.HasPrefix(a, "--") {
			continue // the start URL
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		switch name {
		case "user-data-dir", "remote-debugging-port":
			continue
		}
		flags = append(flags, a)
		if hasValue {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(allocCtx)
	// The first run starts the browser and binds it to the context it is
	// given, so it must be bctx itself (ctx bounds the whole bench run).
	if err := chromedp.Do(bctx); err != nil {
		cancelB()
		cancelAlloc()
		return nil, fmt.Errorf("start the direct Chromium: %w", err)
	}
	pid := 0
	if p := chromedp.FromContext(bctx).Browser.Process(); p != nil {
		pid = p.Pid
	}
	return &directBrowser{browser: bctx, cancel: func() { cancelB(); cancelAlloc() }, flags: flags, pid: pid}, nil
}

func (d *directBrowser) close() { d.cancel() }

// directTab is one tab in its own browser context, as a session's is.
type directTab struct {
	ctx    context.Context
	cancel func()

	// Resolved once, as a ref is: the form's button, input and output.
	save         *chromedp.Node
	input, outEl cdpruntime.RemoteObjectID
}

func (d *directBrowser) newTab(url string) (*directTab, error) {
	tctx, cancel := chromedp.NewContext(d.browser, chromedp.WithNewBrowserContext())
	t := &directTab{ctx: tctx, cancel: cancel}
	// As with the browser, the first run opens the tab for tctx's lifetime.
	if err := chromedp.Do(tctx); err != nil {
		cancel()
		return nil, fmt.Errorf("direct tab: %w", err)
	}
	if err := t.do(chromedp.Navigate(url)); err != nil {
		cancel()
		return nil, fmt.Errorf("direct tab: open %s: %w", url, err)
	}
	return t, nil
}

func (t *directTab) close() { t.cancel() }

// op bounds one CDP action.
func (t *directTab) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.ctx, 30*time.Second)
}

func (t *directTab) do(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := t.op()
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// formTab opens a tab on the form page with its elements resolved.
func (d *directBrowser) formTab(site string) (*directTab, error) {
	tab, err := d.newTab(site + "/form")
	if err != nil {
		return nil, err
	}
	if err := tab.prepareForm(); err != nil {
		tab.close()
		return nil, err
	}
	return tab, nil
}

// prepareForm resolves the form's elements, like a snapshot's refs.
func (t *directTab) prepareForm() error {
	ctx, cancel := t.op()
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("#save")))
	if err != nil || len(nodes) == 0 {
		return fmt.Errorf("direct tab: find #save: %v", err)
	}
	t.save = nodes[0]
	for sel, dst := range map[string]*cdpruntime.RemoteObjectID{"#name": &t.input, "#out": &t.outEl} {
		ns, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
		if err != nil || len(ns) == 0 {
			return fmt.Errorf("direct tab: find %s: %v", sel, err)
		}
		obj, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: ns[0].BackendNodeID})
		if err != nil {
			return fmt.Errorf("direct tab: resolve %s: %w", sel, err)
		}
		*dst = obj.Object.ObjectID
	}
	return nil
}

func (t *directTab) getTitle() error {
	ctx, cancel := t.op()
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Title())
	return err
}

func (t *directTab) eval() error {
	ctx, cancel := t.op()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1+1"))
	if err == nil && v != 2 {
		err = fmt.Errorf("1+1 = %d", v)
	}
	return err
}

func (t *directTab) click() error {
	return t.do(chromedp.MouseClickNode(t.save))
}

const fillFunc = `function(v) {
	this.focus();
	this.value = v;
	this.dispatchEvent(new Event('input', {bubbles: true}));
	this.dispatchEvent(new Event('change', {bubbles: true}));
}`

func (t *directTab) fill() error {
	ctx, cancel := t.op()
	defer cancel()
	arg, _ := json.Marshal("bench")
	res, err := chromedp.Call(ctx, cdpruntime.CallFunctionOn, cdpruntime.CallFunctionOnParams{
		FunctionDeclaration: fillFunc,
		ObjectID:            t.input,
		Arguments:           []*cdpruntime.CallArgument{{Value: arg}},
	})
	if err == nil && res.ExceptionDetails != nil {
		err = errors.New(res.ExceptionDetails.Text)
	}
	return err
}

func (t *directTab) getText() error {
	ctx, cancel := t.op()
	defer cancel()
	res, err := chromedp.Call(ctx, cdpruntime.CallFunctionOn, cdpruntime.CallFunctionOnParams{
		FunctionDeclaration: `function() { return this.innerText }`,
		ObjectID:            t.outEl,
		ReturnByValue:       new(true),
	})
	if err == nil && res.ExceptionDetails != nil {
		err = errors.New(res.ExceptionDetails.Text)
	}
	return err
}

// interactiveRoles get refs in the direct snapshot.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "menuitem": true, "option": true, "searchbox": true,
	"slider": true, "spinbutton": true, "switch": true, "tab": true,
}

// snapshot is the direct equivalent of the snapshot tool: the full
// accessibility tree (Accessibility.getFullAXTree) rendered as ARIA YAML
// with a ref per interactive element and a ref → backend node map. It
// returns the number of refs.
func (t *directTab) snapshot() (int, error) {
	ctx, cancel := t.op()
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return 0, err
	}
	if len(tree.Nodes) == 0 {
		return 0, errors.New("empty accessibility tree")
	}
	byID := make(map[accessibility.NodeID]*accessibility.Node, len(tree.Nodes))
	for _, n := range tree.Nodes {
		byID[n.NodeID] = n
	}
	var b strings.Builder
	refs := map[string]int64{}
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		role, name := axString(n.Role), axString(n.Name)
		if !n.Ignored && role != "" && role != "none" && role != "generic" && role != "StaticText" && role != "InlineTextBox" {
			b.WriteString(strings.Repeat("  ", depth))
			b.WriteString("- ")
			b.WriteString(role)
			if name != "" {
				fmt.Fprintf(&b, " %q", name)
			}
			if interactiveRoles[role] {
				ref := fmt.Sprintf("e%d", len(refs)+1)
				refs[ref] = int64(n.BackendDOMNodeID)
				fmt.Fprintf(&b, " [ref=%s]", ref)
			}
			b.WriteByte('\n')
			depth++
		}
		for _, id := range n.ChildIDs {
			if c := byID[id]; c != nil {
				walk(c, depth)
			}
		}
	}
	walk(tree.Nodes[0], 0)
	return len(refs), nil
}

func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(v.Value, &s); err != nil {
		return strings.Trim(string(v.Value), `"`)
	}
	return s
}
