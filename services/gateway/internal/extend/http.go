package extend

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/httptools"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
)

// Custom HTTP tools (--http-tools; the file format is in package
// internal/httptools).
//
// Each tool of the file is an MCP tool like the others: its calls go
// through the same middleware (audit, approvals) and get the caller's URL
// policy. The gateway holds no secret key, so a call is sent as a request
// template on sov.browser.http to any browser worker: the worker fills in
// the {{secrets.NAME}} values, checks the URL and its redirects against
// the policy, sends it and scrubs every secret value out of the answer.
// The model, the gateway, logs and the audit trail only see placeholders.
//
// Precedence: built-in tools first, then script tools, then HTTP tools. An
// HTTP tool whose name is taken is not registered; it is reported like a
// tool the file gets wrong (log and HTTPTools).

// httpToolTimeoutMargin is how much longer the gateway waits for the
// worker than the worker's own deadline for the request, so that a slow
// endpoint is reported by the worker, which knows why.
const httpToolTimeoutMargin = 5 * time.Second

// httpToolSet is the HTTP tools this gateway serves.
type httpToolSet struct {
	mu    sync.Mutex
	file  []byte   // the file in force
	names []string // the tools registered from it
	errs  []string // what is wrong with the others
}

// storeHTTPTools stores the file named by --http-tools into the bucket
// for the fleet. A file that is not a tools file at all stops the
// gateway; a bad tool in it is reported and left out when it is applied.
func (x *Extensions) storeHTTPTools(ctx context.Context) error {
	path := x.cfg.HTTPToolsFile
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--http-tools: %w", err)
	}
	if _, _, err := httptools.Parse(data); err != nil {
		return fmt.Errorf("--http-tools %s: %w", path, err)
	}
	// Into the fleet's bucket: every gateway serves it.
	if _, err := x.httpKV.KV().Put(ctx, httpToolsKey, data); err != nil {
		return fmt.Errorf("--http-tools %s: store it for the fleet: %w", path, err)
	}
	x.log.InfoContext(ctx, "custom HTTP tools file stored for the fleet", "file", path)
	return nil
}

// httpToolsChanged applies the stored tools file as it changes (the
// mirror's OnChange): its new content, or no tools once it is deleted. A
// re-listing after a NATS reconnect applies the same file again, which
// changes nothing.
func (x *Extensions) httpToolsChanged(_ string, file []byte, stored bool) {
	if !stored {
		file = []byte(`{"tools":[]}`)
	}
	res, err := x.applyHTTPTools(file)
	if err != nil {
		x.log.Error("custom HTTP tools: the stored tools file is not valid; the tools served before stay", "err", err)
		return
	}
	x.log.Info("custom HTTP tools changed", "added", res.Added, "removed", res.Removed, "not_loaded", len(res.Errors))
}

// applyHTTPTools makes data the tools file in force: it registers its
// tools, replacing and removing the ones of the previous file, and records
// what could not be loaded. A file that is not a tools file at all is an
// error and changes nothing. This is the one place that registers HTTP
// tools.
func (x *Extensions) applyHTTPTools(data []byte) (console.ReloadResult, error) {
	tools, terrs, err := httptools.Parse(data)
	if err != nil {
		return console.ReloadResult{}, err
	}
	s := x.http
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []string
	for _, e := range terrs {
		errs = append(errs, e.Error())
	}
	var keep []*httptools.Tool
	for _, t := range tools {
		_, builtin := catalog.Lookup(t.Name)
		if builtin || x.isScriptTool(t.Name) || x.tools.Known(t.Name) && !slices.Contains(s.names, t.Name) {
			errs = append(errs, (&httptools.Error{Index: t.Index, Name: t.Name, Field: "name",
				Msg: "a built-in or script tool has this name (they come first): not registered"}).Error())
			continue
		}
		keep = append(keep, t)
	}
	res := console.ReloadResult{Target: "http-tools", Added: []string{}, Removed: []string{}, Errors: errs}
	var names []string
	for _, t := range keep {
		names = append(names, t.Name)
		if !slices.Contains(s.names, t.Name) {
			res.Added = append(res.Added, t.Name)
		}
	}
	for _, n := range s.names {
		if !slices.Contains(names, n) {
			res.Removed = append(res.Removed, n)
		}
	}
	// A name a script took meanwhile is the script's now: not deleted.
	var drop []string
	for _, n := range res.Removed {
		if !x.isScriptTool(n) {
			drop = append(drop, n)
		}
	}
	x.tools.Remove(drop...)
	for _, t := range keep {
		x.tools.Add(dispatch.Entry{Kind: dispatch.HTTP, Tool: httpTool(t), Handler: x.httpToolHandler(t)})
	}
	for _, e := range errs {
		x.log.Warn("custom HTTP tool not loaded", "err", e)
	}
	s.file, s.names, s.errs = data, names, errs
	res.Tools = x.tools.Listed()
	return res, nil
}

// HTTPTools returns the custom HTTP tools file in force (nil without one)
// and what could not be loaded from it, one line per problem, each naming
// the tool and the field (the admin API's GET /admin/http-tools).
func (x *Extensions) HTTPTools(context.Context) (file []byte, errs []string, err error) {
	s := x.http
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.file), slices.Clone(s.errs), nil
}

// httpTool is an HTTP tool as the listings show it.
func httpTool(t *httptools.Tool) dispatch.Tool {
	tool := dispatch.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema(),
		Annotations: dispatch.Annotations{Title: t.Name, ReadOnly: dispatch.Hint(t.ReadOnly()), OpenWorld: dispatch.Hint(true)}}
	if t.ReadOnly() {
		tool.Annotations.Destructive = dispatch.Hint(false)
	}
	return tool
}

// httpToolHandler is the handler of an HTTP tool: build the request from
// the arguments and have a worker send it.
func (x *Extensions) httpToolHandler(t *httptools.Tool) dispatch.Handler {
	return func(ctx context.Context, c *dispatch.Call) *dispatch.Result {
		r, err := t.Build(c.Args)
		if err != nil {
			return dispatch.Errorf("%s: %v", t.Name, err)
		}
		ctx, cancel := context.WithTimeout(ctx, x.cfg.ToolTimeout+httpToolTimeoutMargin)
		defer cancel()
		resp, err := browserbus.HTTP.Call(ctx, x.bus, &browserv1.HTTPToolRequest{
			Tool:         t.Name,
			Method:       r.Method,
			Url:          r.URL,
			Headers:      r.Headers,
			Body:         r.Body,
			Policy:       x.policy.URLPolicy(c.Caller),
			TimeoutMs:    x.cfg.ToolTimeout.Milliseconds(),
			MaxBodyBytes: t.MaxResponseBytes,
			Redirects:    t.Redirects,
		})
		if err != nil {
			return x.httpToolError(ctx, t, err)
		}
		body := resp.GetBody()
		if body == "" {
			body = fmt.Sprintf("(no body; HTTP %s)", resp.GetStatus())
		}
		if resp.GetStatusCode() >= 400 {
			return dispatch.Errorf("%s: the endpoint answered HTTP %s:\n%s", t.Name, resp.GetStatus(), body)
		}
		return dispatch.Text(body)
	}
}

// httpToolError is the result of a call the worker could not make.
func (x *Extensions) httpToolError(ctx context.Context, t *httptools.Tool, err error) *dispatch.Result {
	msg := bus.MessageOf(err)
	switch bus.CodeOf(err) {
	case commonv1.ErrorCode_FORBIDDEN:
		return dispatch.Denied(fmt.Sprintf("%s: refused by policy: %s", t.Name, msg))
	case commonv1.ErrorCode_TIMEOUT:
		r := dispatch.Errorf("%s did not finish in time: %s", t.Name, msg)
		r.Outcome = historyv1.Outcome_OUTCOME_TIMEOUT
		return r
	case commonv1.ErrorCode_UNAVAILABLE:
		if ctx.Err() != nil {
			return dispatch.ErrorText(t.Name + " was cancelled")
		}
		return dispatch.Errorf("%s: no browser worker answers (custom HTTP tools are sent by the workers, which hold the secrets): %s", t.Name, msg)
	case commonv1.ErrorCode_INVALID_ARGUMENT:
		return dispatch.Errorf("%s: %s", t.Name, msg)
	case commonv1.ErrorCode_NAVIGATION_FAILED:
		return dispatch.Errorf("%s: the request failed: %s", t.Name, msg)
	case commonv1.ErrorCode_TOO_LARGE:
		return dispatch.Errorf("%s: too large: %s", t.Name, msg)
	}
	x.log.ErrorContext(ctx, "HTTP tool call failed", "tool", t.Name, "err", err)
	return dispatch.Errorf("%s: internal error: %s", t.Name, msg)
}
