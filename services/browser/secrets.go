package browser

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
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
// or req itself when it has none. The fields that may hold them are its
// tool's (catalog.Tool.Secrets). The copy must not leave the worker.
func (w *Worker) withSecrets(tool catalog.Tool, req *browserv1.ToolRequest) (*browserv1.ToolRequest, error) {
	if tool.Secrets.In == nil {
		return req, nil
	}
	var cp *browserv1.ToolRequest
	for i, field := range tool.Secrets.In(req) {
		if field == nil || !hasPlaceholder(*field) {
			continue
		}
		if w.secrets == nil {
			if strings.Contains(*field, "secrets.") {
				return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
					"this worker has no secret key, so {{secrets.NAME}} placeholders cannot be used: set %s or %s on the browser workers",
					secrets.EnvKey, secrets.EnvKeyFile)
			}
			continue
		}
		if tool.Secrets.URL {
			if err := placeholderOutsideHost(*field); err != nil {
				return nil, err
			}
		}
		out, used, err := w.secrets.Substitute(*field)
		if err != nil {
			if tool.Secrets.Item != "" {
				return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s %d: %s", tool.Secrets.Item, i+1, err.Error())
			}
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s", err.Error())
		}
		if len(used) == 0 {
			continue
		}
		if cp == nil {
			// Work on a copy: the caller's request (and anything that
			// logs or traces it) keeps the placeholders.
			cp = proto.Clone(req).(*browserv1.ToolRequest)
		}
		*tool.Secrets.In(cp)[i] = out
	}
	if cp == nil {
		return req, nil
	}
	return cp, nil
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
