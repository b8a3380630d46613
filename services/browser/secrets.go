package browser

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Operator secrets in tool calls.
//
// fill and type values, fill_form values, open and tab_new URLs and
// handle_dialog's prompt_text may hold placeholders
// {{secrets.NAME}}. The worker puts the values in at the last moment, on a
// copy of the request that never leaves this process, and scrubs every
// result and error: any secret value in them (plain or encoded) becomes
// its placeholder again. So the gateway, the model, logs, traces and the
// audit trail only ever see placeholders.

// openSecrets starts following the secrets bucket when the worker has a
// key.
func (w *Worker) openSecrets(ctx context.Context, c *bus.Conn) error {
	if w.cfg.SecretKey == nil {
		return nil
	}
	store, err := secrets.Open(ctx, c.NATS(), c.Prefix(), w.cfg.SecretKey)
	if err != nil {
		return err
	}
	cache, err := store.Watch(ctx)
	if err != nil {
		return err
	}
	if err := cache.Check(); err != nil {
		// Secrets of another key stay unusable, and calls naming them say
		// so; the others work.
		w.log.Warn("some secrets cannot be decrypted with this worker's key", "key_id", w.cfg.SecretKey.ID(), "err", err)
	}
	w.secrets = cache
	w.log.Info("operator secrets available", "count", len(cache.Names()), "key_id", w.cfg.SecretKey.ID())
	return nil
}

// hasPlaceholder reports whether s may hold a secret placeholder.
func hasPlaceholder(s string) bool { return strings.Contains(s, "{{") }

// withSecrets returns req with its placeholders replaced by the values,
// or req itself when it has none. The copy must not leave the worker.
func (w *Worker) withSecrets(req *browserv1.ToolRequest) (*browserv1.ToolRequest, error) {
	if req.GetFillForm() != nil {
		return w.formSecrets(req)
	}
	var field *string
	switch t := req.GetTool().(type) {
	case *browserv1.ToolRequest_Fill:
		if t.Fill != nil && hasPlaceholder(t.Fill.GetValue()) {
			field = &t.Fill.Value
		}
	case *browserv1.ToolRequest_Type:
		if t.Type != nil && hasPlaceholder(t.Type.GetValue()) {
			field = &t.Type.Value
		}
	case *browserv1.ToolRequest_Open:
		if t.Open != nil && hasPlaceholder(t.Open.GetUrl()) {
			field = &t.Open.Url
		}
	case *browserv1.ToolRequest_TabNew:
		if t.TabNew != nil && hasPlaceholder(t.TabNew.GetUrl()) {
			field = &t.TabNew.Url
		}
	case *browserv1.ToolRequest_HandleDialog:
		if t.HandleDialog != nil && hasPlaceholder(t.HandleDialog.GetPromptText()) {
			field = t.HandleDialog.PromptText
		}
	}
	if field == nil {
		return req, nil
	}
	if w.secrets == nil {
		if strings.Contains(*field, "secrets.") {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"this worker has no secret key, so {{secrets.NAME}} placeholders cannot be used: set %s or %s on the browser workers",
				secrets.EnvKey, secrets.EnvKeyFile)
		}
		return req, nil
	}
	if isURLField(req) {
		if err := placeholderOutsideHost(*field); err != nil {
			return nil, err
		}
	}
	out, used, err := w.secrets.Substitute(*field)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s", err.Error())
	}
	if len(used) == 0 {
		return req, nil
	}
	// Work on a copy: the caller's request (and anything that logs or
	// traces it) keeps the placeholder.
	cp := proto.Clone(req).(*browserv1.ToolRequest)
	switch t := cp.GetTool().(type) {
	case *browserv1.ToolRequest_Fill:
		t.Fill.Value = out
	case *browserv1.ToolRequest_Type:
		t.Type.Value = out
	case *browserv1.ToolRequest_Open:
		t.Open.Url = out
	case *browserv1.ToolRequest_TabNew:
		t.TabNew.Url = out
	case *browserv1.ToolRequest_HandleDialog:
		t.HandleDialog.PromptText = &out
	}
	return cp, nil
}

// formSecrets is withSecrets for fill_form: each field's value may hold
// placeholders.
func (w *Worker) formSecrets(req *browserv1.ToolRequest) (*browserv1.ToolRequest, error) {
	var cp *browserv1.ToolRequest
	for i, f := range req.GetFillForm().GetFields() {
		if f.Value == nil || !hasPlaceholder(f.GetValue()) {
			continue
		}
		if w.secrets == nil {
			if strings.Contains(f.GetValue(), "secrets.") {
				return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
					"this worker has no secret key, so {{secrets.NAME}} placeholders cannot be used: set %s or %s on the browser workers",
					secrets.EnvKey, secrets.EnvKeyFile)
			}
			continue
		}
		out, used, err := w.secrets.Substitute(f.GetValue())
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "fill_form field %d: %s", i+1, err.Error())
		}
		if len(used) == 0 {
			continue
		}
		if cp == nil {
			// As withSecrets: the caller's request keeps the placeholders.
			cp = proto.Clone(req).(*browserv1.ToolRequest)
		}
		cp.GetFillForm().GetFields()[i].Value = &out
	}
	if cp == nil {
		return req, nil
	}
	return cp, nil
}

func isURLField(req *browserv1.ToolRequest) bool {
	return req.GetOpen() != nil || req.GetTabNew() != nil
}

// placeholderOutsideHost refuses a secret in a URL's scheme or host: the
// browser rewrites hosts (lower case, punycode), so the value would come
// back in forms scrubbing cannot recognise, and a host is a DNS query that
// leaks it to any resolver on the way.
func placeholderOutsideHost(raw string) error {
	host := raw
	if i := strings.Index(host, "://"); i >= 0 {
		if strings.Contains(host[:i], "{{") {
			return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "a {{secrets.NAME}} placeholder may not stand in a URL's scheme")
		}
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = host[at+1:] // user info may hold a secret
	}
	if strings.Contains(host, "{{") {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"a {{secrets.NAME}} placeholder may stand in a URL's path, query or user info, not in its host")
	}
	return nil
}

// scrubResult replaces secret values in a result with their placeholders:
// its text and structured content, and every file it carries (an image, a
// PDF, a download, a trace) through the one path for files,
// secrets.Cache.ScrubFile, which scrubs a text file and refuses a binary
// one that holds a value. A refused file refuses the whole result, with
// an error that names the file and the secret.
func (w *Worker) scrubResult(res *browserv1.ToolResult) (*browserv1.ToolResult, error) {
	if w.secrets == nil || res == nil {
		return res, nil
	}
	for _, c := range res.GetContent() {
		switch p := c.GetPart().(type) {
		case *browserv1.Content_Text:
			p.Text = w.secrets.Scrub(p.Text)
		case *browserv1.Content_Resource:
			data, err := w.secrets.ScrubFile(p.Resource.GetName(), p.Resource.GetMimeType(), p.Resource.GetData())
			if err != nil {
				return nil, fileRefused(err)
			}
			// The page names a download, and types it.
			p.Resource.Data, p.Resource.Name, p.Resource.MimeType = data, w.secrets.Scrub(p.Resource.GetName()), w.secrets.Scrub(p.Resource.GetMimeType())
		case *browserv1.Content_Image:
			name := "image." + strings.TrimPrefix(p.Image.GetMimeType(), "image/")
			data, err := w.secrets.ScrubFile(name, p.Image.GetMimeType(), p.Image.GetData())
			if err != nil {
				return nil, fileRefused(err)
			}
			p.Image.Data = data
		}
	}
	w.secrets.ScrubStruct(res.Structured)
	return res, nil
}

// fileRefused is the tool error for a file that ScrubFile refused.
func fileRefused(err error) error {
	return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s", err.Error())
}

// scrubErr replaces secret values in an error's message (a navigation
// error names its URL, a script error may quote the page).
func (w *Worker) scrubErr(err error) error {
	if w.secrets == nil || err == nil {
		return err
	}
	var be *bus.Error
	if errors.As(err, &be) {
		if msg := w.secrets.Scrub(be.Message); msg != be.Message {
			return bus.Errorf(be.Code, "%s", msg)
		}
		return err
	}
	if msg := w.secrets.Scrub(err.Error()); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}

// scrubbed wraps an endpoint's handler so that its error is scrubbed
// (call and httpCall scrub their results and errors themselves).
func scrubbed[Req, Resp any](w *Worker, h func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		resp, err := h(ctx, req)
		return resp, w.scrubErr(err)
	}
}
