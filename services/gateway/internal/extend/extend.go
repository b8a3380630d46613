// Package extend serves the tools an operator deploys: script tools
// (JavaScript in the KV bucket <prefix>_scripts, internal/scripts) and
// custom HTTP tools (the tools file in the KV bucket <prefix>_http_tools,
// http.go). Every gateway follows both buckets, so a deploy on any gateway
// (admin API, sovereign__reload, SOVEREIGN_TOOLS_DIR, SOVEREIGN_HTTP_TOOLS)
// reaches the whole fleet within moments, and each gateway tells its
// connected MCP clients with notifications/tools/list_changed.
//
// Precedence is fixed: built-in tools, then scripts, then HTTP tools. A
// later source never takes an earlier one's name, so tools/list and
// tools/call always agree.
package extend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/httptools"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/scripts"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/kvmirror"
)

// setupTimeout bounds the NATS work of Open after the scripts have loaded.
const setupTimeout = 10 * time.Second

// httpToolsKey is the tools file's key in its bucket.
const httpToolsKey = "tools_json"

// Config is what the extensions serve and how long their calls may take.
type Config struct {
	// ToolsDir is the directory of script tools stored into the bucket at
	// start and on reload ("" for none); ScriptTimeout the time budget of
	// one script call.
	ToolsDir      string
	ScriptTimeout time.Duration
	// HTTPToolsFile is the custom HTTP tools file stored into the bucket
	// at start ("" for none); ToolTimeout bounds one HTTP tool call.
	HTTPToolsFile string
	ToolTimeout   time.Duration
}

// Tools is the gateway's tool registry as the extensions use it.
type Tools interface {
	// Add registers tools on the dispatcher and the MCP server; Remove
	// forgets them there.
	Add(entries ...dispatch.Entry)
	Remove(names ...string)
	// Lookup and Dispatch find and run a script's inner calls.
	Lookup(name string) (dispatch.Entry, bool)
	Known(name string) bool
	Dispatch(ctx context.Context, c *dispatch.Call) *dispatch.Result
	// Listed is how many tools MCP clients see.
	Listed() int
}

// URLPolicy is the URL policy an HTTP tool call of a caller gets.
type URLPolicy interface {
	URLPolicy(c dispatch.Caller) *browserv1.UrlPolicy
}

// Extensions are the deployable tools of a gateway.
type Extensions struct {
	cfg    Config
	bus    *bus.Conn
	tools  Tools
	policy URLPolicy
	log    *slog.Logger

	scripts   *scripts.Registry
	store     *scripts.Store
	httpKV    *kvbucket.Bucket
	httpFile  *kvmirror.Mirror[[]byte] // the stored tools file, applied as it changes
	http      *httpToolSet
	stop      context.CancelFunc
	done      sync.WaitGroup
	seedErr   string // why SOVEREIGN_TOOLS_DIR could not be read at the last seed
	seedErrMu sync.Mutex
}

// Open opens the script and HTTP tool buckets, seeds them from the tools
// dir and the HTTP tools file, registers what they hold in tools and
// follows them until Close. Loading scripts may take seconds (describe()
// has 5 s each): ctx is the caller's, not a short step's. Call Close
// whatever Open returns.
func Open(ctx context.Context, c *bus.Conn, cfg Config, tools Tools, policy URLPolicy, log *slog.Logger) (*Extensions, error) {
	x := &Extensions{cfg: cfg, bus: c, tools: tools, policy: policy, log: log, http: &httpToolSet{}}
	return x, x.open(ctx)
}

func (x *Extensions) open(ctx context.Context) error {
	store, err := scripts.OpenStore(ctx, x.bus.NATS(), x.bus.Prefix())
	if err != nil {
		return fmt.Errorf("script tools: %w", err)
	}
	builtin := map[string]bool{}
	for _, t := range catalog.Tools() {
		builtin[t.Name] = true
	}
	x.store = store
	x.scripts = scripts.NewRegistry(store, scripts.RegistryOptions{
		Options:  scripts.Options{Log: x.log, Limits: scripts.Limits{Call: x.cfg.ScriptTimeout}},
		Builtin:  builtin,
		OnChange: x.scriptsChanged,
	})
	x.httpKV, err = kvbucket.Open(ctx, x.bus.NATS(), kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      httpToolsBucket(x.bus.Prefix()),
			Description: "Sovereign gateway: the custom HTTP tools file every gateway serves",
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "the gateways keep the custom HTTP tools file",
	})
	if err != nil {
		return fmt.Errorf("custom HTTP tools: %w", err)
	}
	if x.cfg.ToolsDir != "" {
		if _, err := x.seedScripts(ctx); err != nil {
			x.log.Error("script tools: the tools dir could not be read; serving what the bucket holds", "dir", x.cfg.ToolsDir, "err", err)
		}
	}
	if _, err := x.scripts.Reload(ctx, ""); err != nil {
		x.log.Error("script tools: not loaded", "err", err)
	}
	// Loading took up to 5 s per slow describe(): what follows gets a
	// deadline of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer cancel()
	if err := x.storeHTTPTools(ctx); err != nil { // the file, into the bucket (http.go)
		return err
	}
	// The mirror applies the stored file before it returns, then every
	// change of it (http.go).
	x.httpFile, err = kvmirror.New(ctx, x.httpKV, kvmirror.Options[[]byte]{
		Filter:   httpToolsKey,
		Decode:   func(_ string, val []byte) ([]byte, error) { return val, nil },
		OnChange: x.httpToolsChanged,
		Log:      x.log,
	})
	if err != nil {
		return fmt.Errorf("custom HTTP tools: %w", err)
	}
	for name, why := range x.scripts.Errors() {
		x.log.Warn("script tool not loaded", "script", name, "reason", why)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	x.stop = stop
	x.done.Go(func() { _ = x.scripts.Watch(bg) })
	return nil
}

// Close stops following the buckets.
func (x *Extensions) Close() {
	if x.stop != nil {
		x.stop()
		x.done.Wait()
	}
	if x.httpFile != nil {
		x.httpFile.Close()
	}
}

func httpToolsBucket(prefix string) string { return bus.BucketName(prefix, "_http_tools") }

// seedScripts stores SOVEREIGN_TOOLS_DIR's scripts into the bucket.
func (x *Extensions) seedScripts(ctx context.Context) (scripts.SeedReport, error) {
	rep, err := x.scripts.SeedDir(ctx, x.cfg.ToolsDir)
	x.seedErrMu.Lock()
	x.seedErr = ""
	if err != nil {
		x.seedErr = err.Error()
	}
	x.seedErrMu.Unlock()
	if err == nil && len(rep.Added)+len(rep.Updated) > 0 {
		x.log.Info("script tools seeded from the tools dir", "dir", x.cfg.ToolsDir, "added", rep.Added, "updated", rep.Updated)
	}
	return rep, err
}

// scriptsChanged is the registry's OnChange: it registers the new and
// changed script tools, removes the gone ones (the MCP server then sends
// notifications/tools/list_changed to this gateway's clients), and lets
// the HTTP tools take the names scripts freed or give up the ones they
// took.
func (x *Extensions) scriptsChanged(added, removed []scripts.Tool) {
	var gone []string
	for _, t := range removed {
		gone = append(gone, t.Name)
	}
	x.tools.Remove(gone...)
	var add []dispatch.Entry
	for _, t := range added {
		tool := scriptTool(t)
		add = append(add, dispatch.Entry{Kind: dispatch.Script, Tool: tool, Handler: x.scriptHandler(t.Name),
			AgentSchema: withoutSession(tool.InputSchema)})
	}
	x.tools.Add(add...)
	x.log.Info("script tools changed", "added", toolNames(added), "removed", gone)
	x.http.mu.Lock()
	file := x.http.file
	x.http.mu.Unlock()
	if file != nil {
		if _, err := x.applyHTTPTools(file); err != nil {
			x.log.Error("custom HTTP tools: re-apply after a script change", "err", err)
		}
	}
}

func toolNames(ts []scripts.Tool) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// isScriptTool reports whether a script serves name.
func (x *Extensions) isScriptTool(name string) bool {
	_, ok := x.scripts.Lookup(name)
	return ok
}

// scriptTool is a script tool as the listings show it: its schema with
// the session argument browser tools take, so a 2026 client can name the
// browser session the script's inner calls act in.
func scriptTool(t scripts.Tool) dispatch.Tool {
	var schema map[string]any
	_ = json.Unmarshal(t.InputSchema, &schema)
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	if _, taken := props[catalog.SessionParam]; !taken {
		props[catalog.SessionParam] = map[string]any{"type": "string",
			"description": "Browser session handle (sov_…) the script's browser calls act in; omit it with an MCP session, or to open a new browser session"}
	}
	schema["properties"] = props
	raw, _ := json.Marshal(schema)
	desc := t.Description
	if desc == "" {
		desc = "Script tool " + t.Name + "."
	}
	return dispatch.Tool{Name: t.Name, Description: desc, InputSchema: raw,
		Annotations: dispatch.Annotations{Title: t.Name, OpenWorld: dispatch.Hint(true)}}
}

// withoutSession is a tool's input schema without the session argument
// (an agent run's tools: its browser session is its request's).
func withoutSession(schema json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return nil
	}
	if props, ok := m["properties"].(map[string]any); ok {
		delete(props, catalog.SessionParam)
	}
	out, _ := json.Marshal(m)
	return out
}

// scriptHandler runs a script tool. Its inner tool calls go through the
// same dispatcher as the call itself: the caller, its browser session, URL
// policy, approvals and audit apply to each. They all act in one browser
// session: the call's (its session handle, or its MCP session), or else
// the one the first of them opens, whose new handle the result then
// announces as a browser tool's would.
func (x *Extensions) scriptHandler(name string) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		args := maps.Clone(c.Args)
		sess := &scriptSession{handle: c.Handle}
		if _, declared := x.scriptDeclares(name, catalog.SessionParam); !declared {
			delete(args, catalog.SessionParam)
		}
		host := scripts.HostFunc(func(ctx context.Context, tool string, raw json.RawMessage) (string, bool, error) {
			return x.innerCall(ctx, c, tool, raw, sess)
		})
		text, isErr, err := x.scripts.Call(ctx, name, args, host)
		var res *dispatch.Result
		switch {
		case errors.Is(err, scripts.ErrUnknownTool):
			res = dispatch.Errorf("%s: the script tool was removed or changed meanwhile; list the tools again", name)
		case err != nil:
			res = dispatch.Errorf("%s: %v", name, err)
		case isErr:
			res = dispatch.ErrorText(text)
		default:
			res = dispatch.Text(text)
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if sess.handle != "" && (sess.minted || sess.used) {
			res.Session, res.NewSession = sess.handle, sess.minted
		}
		return res
	}
}

// scriptSession is the browser session of one script tool call: the
// handle the call named or its first inner call opened ("" while it acts
// in its MCP session, or has none yet).
type scriptSession struct {
	mu     sync.Mutex
	handle string
	minted bool // the handle is new: the result announces it
	used   bool // an inner call acted in the handle
}

// scriptDeclares reports whether script tool name declares argument arg.
func (x *Extensions) scriptDeclares(name, arg string) (scripts.Tool, bool) {
	t, ok := x.scripts.Lookup(name)
	if !ok {
		return t, false
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(t.InputSchema, &schema)
	_, has := schema.Properties[arg]
	return t, has
}

// innerCall runs one tool call of a script through the dispatcher, as a
// call of the script call's caller, transport and run. A tool that acts in
// a browser session gets the script call's session handle unless the
// script named one; the handle a call without one opens becomes the script
// call's.
func (x *Extensions) innerCall(ctx context.Context, outer *dispatch.Call, tool string, raw json.RawMessage, sess *scriptSession) (string, bool, error) {
	var args map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return fmt.Sprintf("%s: the arguments must be an object", tool), true, nil
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	e, known := x.tools.Lookup(tool)
	inSession := known && e.Kind.InSession()
	_, named := args[catalog.SessionParam]
	sess.mu.Lock()
	if inSession && !named && sess.handle != "" {
		args[catalog.SessionParam] = sess.handle
	}
	sess.mu.Unlock()
	c := &dispatch.Call{
		Tool: tool, Args: args, Caller: outer.Caller,
		Transport: outer.Transport, MCPSession: outer.MCPSession, RunID: outer.RunID, Client: outer.Client,
		// The script call's client hears the inner calls' notices but not
		// their progress (their values would not grow under its token).
		Progress: innerProgress{outer.Progress},
		// A 2025 client may be asked on the call's stream; a 2026
		// client's input-required result could not reach it from here.
		Ask: outer.Ask,
	}
	c.Handle, _ = args[catalog.SessionParam].(string)
	res := x.tools.Dispatch(ctx, c)
	if res.Input != nil {
		return fmt.Sprintf("%s needs an approval that a script's inner call cannot ask the client for", tool), true, nil
	}
	if h := res.Session; h != "" && inSession && !named {
		sess.mu.Lock()
		if sess.handle == "" {
			sess.handle, sess.minted = h, true
		}
		sess.used = sess.used || sess.handle == h
		sess.mu.Unlock()
	}
	return res.TextContent(), res.IsError, nil
}

// innerProgress is the Progress of a script's inner call: the script
// call's, without the reports.
type innerProgress struct{ dispatch.Progress }

func (innerProgress) Report(context.Context, float64, float64, string) error { return nil }

// --- admin API sources ---

// Scripts is the admin API's script source.
func (x *Extensions) Scripts() console.Scripts { return consoleScripts{x} }

// consoleScripts is the admin API's script source.
type consoleScripts struct{ x *Extensions }

func scriptInfo(i scripts.ScriptInfo) console.ScriptInfo {
	return console.ScriptInfo{Name: i.Stem, Tools: i.Tools, Error: i.Error}
}

func (c consoleScripts) List(ctx context.Context) ([]console.ScriptInfo, error) {
	var out []console.ScriptInfo
	for _, i := range c.x.scripts.Scripts() {
		out = append(out, scriptInfo(i))
	}
	// Files of the tools dir that could not be stored are reported too.
	for name, why := range c.x.scripts.Errors() {
		if strings.HasSuffix(name, ".js") {
			out = append(out, console.ScriptInfo{Name: name, Tools: []string{}, Error: why})
		}
	}
	return out, nil
}

func (c consoleScripts) Get(ctx context.Context, name string) ([]byte, error) {
	e, err := c.x.store.Get(ctx, name)
	if errors.Is(err, scripts.ErrNotFound) {
		return nil, fmt.Errorf("%w: script %s", console.ErrNotFound, name)
	}
	return e.Source, err
}

func (c consoleScripts) Validate(_ context.Context, name string, src []byte) (console.ScriptInfo, error) {
	s, err := c.x.scripts.Validate(name, src)
	if err != nil {
		return console.ScriptInfo{}, fmt.Errorf("%w: %w", console.ErrInvalid, err)
	}
	info := console.ScriptInfo{Name: name, Size: len(src), Tools: []string{}, Skipped: []string{}}
	for _, t := range s.Tools {
		info.Tools = append(info.Tools, t.Name)
	}
	return info, nil
}

func (c consoleScripts) Put(ctx context.Context, name string, src []byte) (console.ScriptInfo, error) {
	info, err := c.Validate(ctx, name, src)
	if err != nil {
		return info, err
	}
	if _, err := c.x.store.Put(ctx, name, src); err != nil {
		return info, err
	}
	// Applied here at once (the watch brings it to the other gateways).
	if _, err := c.x.scripts.Reload(ctx, name); err != nil {
		return info, err
	}
	return info, nil
}

func (c consoleScripts) Delete(ctx context.Context, name string) error {
	err := c.x.store.Delete(ctx, name)
	if errors.Is(err, scripts.ErrNotFound) {
		return fmt.Errorf("%w: script %s", console.ErrNotFound, name)
	}
	if err != nil {
		return err
	}
	_, err = c.x.scripts.Reload(ctx, name)
	return err
}

// PutHTTPTools stores a new tools file for the fleet: checked first, so a
// file that is not a tools file changes nothing.
func (x *Extensions) PutHTTPTools(ctx context.Context, file []byte) (console.ReloadResult, error) {
	if _, _, err := httptools.Parse(file); err != nil {
		return console.ReloadResult{}, fmt.Errorf("%w: %w", console.ErrInvalid, err)
	}
	if _, err := x.httpKV.KV().Put(ctx, httpToolsKey, file); err != nil {
		return console.ReloadResult{}, fmt.Errorf("store the tools file: %w", err)
	}
	return x.applyHTTPTools(file)
}

// Reload re-reads what target names, for the admin API and
// sovereign__reload: scripts (the tools dir into the bucket, then the
// bucket), profiles (nothing to do: workers fetch a profile's newest
// version at every session open) or all. If the scripts cannot be read,
// the tools served before stay and the error says so.
func (x *Extensions) Reload(ctx context.Context, target, name string) (console.ReloadResult, error) {
	res := console.ReloadResult{Target: target, Added: []string{}, Removed: []string{}, Errors: []string{}}
	if target == "scripts" || target == "all" {
		if x.cfg.ToolsDir != "" && name == "" {
			if _, err := x.seedScripts(ctx); err != nil {
				res.Tools = x.tools.Listed()
				return res, fmt.Errorf("reload scripts: %w; the script tools served before are kept", err)
			}
		}
		ch, err := x.scripts.Reload(ctx, name)
		if err != nil {
			res.Tools = x.tools.Listed()
			return res, err
		}
		res.Added, res.Removed = toolNames(ch.Added), toolNames(ch.Removed)
		for stem, why := range x.scripts.Errors() {
			res.Errors = append(res.Errors, stem+": "+why)
		}
		slices.Sort(res.Errors)
	}
	res.Tools = x.tools.Listed()
	return res, nil
}

// ScriptsText renders sovereign__list_scripts.
func (x *Extensions) ScriptsText() (string, map[string]any) {
	list := x.scripts.Scripts()
	errs := x.scripts.Errors()
	var b strings.Builder
	fmt.Fprintf(&b, "%d scripts", len(list))
	if x.cfg.ToolsDir != "" {
		fmt.Fprintf(&b, " (tools dir %s)", x.cfg.ToolsDir)
	}
	b.WriteString(":\n")
	for _, s := range list {
		if s.Error != "" {
			fmt.Fprintf(&b, "- %s: NOT LOADED: %s\n", s.Stem, s.Error)
			continue
		}
		fmt.Fprintf(&b, "- %s: %s\n", s.Stem, strings.Join(s.Tools, ", "))
	}
	for name, why := range errs {
		if strings.HasSuffix(name, ".js") {
			fmt.Fprintf(&b, "- %s: NOT STORED: %s\n", name, why)
		}
	}
	x.seedErrMu.Lock()
	if x.seedErr != "" {
		fmt.Fprintf(&b, "tools dir: %s\n", x.seedErr)
	}
	x.seedErrMu.Unlock()
	return b.String(), map[string]any{"scripts": list}
}
