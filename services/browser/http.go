package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/micro"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// Custom HTTP tools (the gateway's --http-tools file).
//
// sov.browser.http (queue group sovereign-browser-http: any worker
// answers, no browser session is involved) sends one request of a tool
// call. The gateway sends the request template; the worker, which holds
// the secret key:
//
//   - fills in the {{secrets.NAME}} placeholders of the URL (path and
//     query only) and of the header values, never of the body;
//   - checks the final URL against the caller's URL policy, resolving its
//     host and then connecting only to the addresses it checked (a DNS
//     answer that changes between check and connect changes nothing);
//   - follows at most [httpMaxRedirects] redirects, checking each one the
//     same way; a redirect that leaves the endpoint's origin (scheme, host
//     and port) is refused unless the tool's "redirects" patterns allow
//     its target, and even then it carries none of the tool's headers
//     (secrets or not; Content-Type only) and refuses a URL that holds a
//     secret value;
//   - never sends a Referer (Go's client would send the previous hop's
//     URL, query and all, on a redirect), unless the tool declares one,
//     which goes to the endpoint's origin only;
//   - reads at most max_body_bytes of the body (clipping the rest with a
//     note), and replaces every secret value in what it answers (status,
//     content type, body, errors) by its placeholder.
//
// Proxy settings of the environment (HTTP_PROXY) are not used: the policy
// judges the host the request really goes to.

// Limits of an HTTP tool call.
const (
	httpQueue          = "sovereign-browser-http"
	httpDefaultTimeout = 30 * time.Second
	httpMaxTimeout     = time.Hour
	httpDefaultBody    = 1 << 20
	httpMaxBody        = 16 << 20
	httpMaxRedirects   = 10
)

var httpMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// addHTTPEndpoint serves sov.browser.http on svc.
func (w *Worker) addHTTPEndpoint(c *bus.Conn, svc micro.Service) error {
	return svc.AddEndpoint(browserbus.HTTP.Name, bus.Handle(c, w.httpCall),
		micro.WithEndpointSubject(browserbus.HTTP.Subject(c)),
		micro.WithEndpointQueueGroup(httpQueue))
}

// httpCall answers sov.browser.http.
func (w *Worker) httpCall(ctx context.Context, req *browserv1.HTTPToolRequest) (*browserv1.HTTPToolResponse, error) {
	start := time.Now()
	res, err := w.sendHTTP(ctx, req)
	err = w.scrubErr(err)
	attrs := []any{"tool", req.GetTool(), "method", req.GetMethod(), "duration", time.Since(start).Round(time.Millisecond).String()}
	if err != nil {
		w.log.InfoContext(ctx, "http tool call failed", append(attrs, "err", err)...)
		return nil, err
	}
	w.log.InfoContext(ctx, "http tool call", append(attrs, "status", res.GetStatusCode(), "clipped", res.GetClipped())...)
	return res, nil
}

func (w *Worker) sendHTTP(ctx context.Context, req *browserv1.HTTPToolRequest) (*browserv1.HTTPToolResponse, error) {
	invalid := func(format string, a ...any) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s", fmt.Sprintf(format, a...))
	}
	method := req.GetMethod()
	if !slices.Contains(httpMethods, method) {
		return nil, invalid("method %q is not one of %s", method, strings.Join(httpMethods, ", "))
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	switch {
	case timeout == 0:
		timeout = httpDefaultTimeout
	case timeout < 0 || timeout > httpMaxTimeout:
		return nil, invalid("timeout_ms %d: must be from 1 to %d", req.GetTimeoutMs(), httpMaxTimeout.Milliseconds())
	}
	limit := req.GetMaxBodyBytes()
	switch {
	case limit == 0:
		limit = httpDefaultBody
	case limit < 0 || limit > httpMaxBody:
		return nil, invalid("max_body_bytes %d: must be from 1 to %d", limit, httpMaxBody)
	}
	if err := placeholderOutsideHost(req.GetUrl()); err != nil {
		return nil, err
	}
	// Secrets go in at the last moment, into values that never leave
	// this function.
	rawURL, err := w.fillSecrets(req.GetUrl())
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// Not the parser's message: it quotes the URL, secrets and all.
		return nil, invalid("the URL is not valid once its secrets are in (a secret value in a URL may need percent-encoding)")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, invalid("%s is not an absolute http or https URL", shortURL(u))
	}
	header := http.Header{"User-Agent": {"Sovereign/" + Version + " (custom HTTP tool)"}}
	for _, k := range sortedHeaderNames(req.GetHeaders()) {
		v, err := w.fillSecrets(req.GetHeaders()[k])
		if err != nil {
			return nil, invalid("header %s: %v", k, busMessage(err))
		}
		header.Set(k, v)
	}
	pol, err := compilePolicy(req.GetPolicy())
	if err != nil {
		return nil, err
	}
	redirects, err := urlpolicy.ParseRules(req.GetRedirects())
	if err != nil {
		return nil, invalid("redirects: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g := &httpGuard{pol: pol, pinned: map[string][]net.IP{}}
	if err := g.check(ctx, u); err != nil {
		return nil, err
	}
	client := g.client(func(next *http.Request) error {
		if urlpolicy.SameOrigin(next.URL, u) {
			if ref := header.Get("Referer"); ref != "" {
				next.Header.Set("Referer", ref) // the tool's own, to its own origin
			}
			return nil
		}
		if !slices.ContainsFunc(redirects, func(r urlpolicy.Rule) bool { return r.MatchesURL(next.URL) }) {
			return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
				"redirect to %s refused: it leaves the endpoint's origin %s, and the tool's \"redirects\" does not allow that host (ask the operator to add it)",
				shortURL(next.URL), origin(u))
		}
		if w.secrets != nil && w.secrets.Scrub(next.URL.String()) != next.URL.String() {
			return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
				"redirect to %s refused: its URL carries a secret value, which never leaves the endpoint's origin %s", shortURL(next.URL), origin(u))
		}
		for k := range next.Header {
			if k != "Content-Type" && k != "User-Agent" {
				next.Header.Del(k) // the tool's headers, secret or not
			}
		}
		return nil
	})
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.GetBody()))
	if err != nil {
		return nil, invalid("build the request: %v", err)
	}
	if len(req.GetBody()) == 0 {
		hreq.Body, hreq.ContentLength = http.NoBody, 0
	}
	hreq.Header = header
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, sendError(ctx, method, u, timeout, err)
	}
	defer resp.Body.Close()

	// Read past the cap by the secrets' margin, so that a value the cap
	// cuts is seen whole and scrubbed before the cut.
	readLimit := limit + int64(w.secrets.Margin())
	raw, err := io.ReadAll(io.LimitReader(resp.Body, readLimit+1))
	if err != nil && len(raw) == 0 {
		return nil, sendError(ctx, method, u, timeout, fmt.Errorf("read the body: %w", err))
	}
	out := &browserv1.HTTPToolResponse{
		StatusCode:  int32(resp.StatusCode),
		Status:      w.secrets.Scrub(resp.Status),
		ContentType: w.secrets.Scrub(resp.Header.Get("Content-Type")),
	}
	text, _ := secrets.Cut(string(raw), -1, int64(len(raw)) > readLimit) // scrub, then cut
	if out.Clipped = int64(len(raw)) > limit; int64(len(text)) > limit {
		text = trimPartialRune(text[:limit])
	}
	switch {
	case !utf8.ValidString(text):
		text = fmt.Sprintf("[binary content (%s), not shown]", orUnknown(out.ContentType))
	case out.Clipped && resp.ContentLength > 0:
		text += fmt.Sprintf("\n[clipped: this is the first %d bytes of %d]", limit, resp.ContentLength)
	case out.Clipped:
		text += fmt.Sprintf("\n[clipped: this is the first %d bytes; the body is longer]", limit)
	}
	if err != nil {
		text += fmt.Sprintf("\n[the body broke off after %d bytes: %v]", len(raw), err)
	}
	out.Body = text
	return out, nil
}

// fillSecrets puts the secret values into s; the error names a secret
// that is unknown or unreadable, never a value.
func (w *Worker) fillSecrets(s string) (string, error) {
	if !hasPlaceholder(s) {
		return s, nil
	}
	if w.secrets == nil {
		if strings.Contains(s, "secrets.") {
			return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
				"this worker has no secret key, so {{secrets.NAME}} placeholders cannot be used: set %s or %s on the browser workers",
				secrets.EnvKey, secrets.EnvKeyFile)
		}
		return s, nil
	}
	out, _, err := w.secrets.Substitute(s)
	if err != nil {
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s", err.Error())
	}
	return out, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of s.
func trimPartialRune(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			return s
		}
	}
	return s
}

// sendError maps a failed request to its error code.
func sendError(ctx context.Context, method string, u *url.URL, timeout time.Duration, err error) error {
	var be *bus.Error
	if errors.As(err, &be) {
		return be // a policy refusal or too many redirects
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL holds the secrets
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s %s: the call was cancelled", method, shortURL(u))
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return bus.Errorf(commonv1.ErrorCode_TIMEOUT, "%s %s did not finish within %s", method, shortURL(u), timeout)
	}
	return bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "%s %s failed: %v", method, shortURL(u), err)
}

// origin shows a URL's origin: scheme and host (with its port).
func origin(u *url.URL) string { return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() }

// shortURL shows a URL in messages: scheme, host and path, without the
// query and user info (the worker scrubs messages too).
func shortURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

func busMessage(err error) string {
	var be *bus.Error
	if errors.As(err, &be) {
		return be.Message
	}
	return err.Error()
}

func orUnknown(s string) string {
	if s == "" {
		return "no content type"
	}
	return s
}

func sortedHeaderNames(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// httpGuard holds one call's URL policy: check decides on a URL and pins
// the addresses its host resolved to; dial connects only to pinned
// addresses.
type httpGuard struct {
	pol    *urlpolicy.Policy // nil: nothing enforced
	mu     sync.Mutex
	pinned map[string][]net.IP // lower-case host → checked addresses
}

func (g *httpGuard) check(ctx context.Context, u *url.URL) error {
	if g.pol == nil {
		return nil
	}
	if d := g.pol.Check(u, nil); !d.Allowed {
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s is blocked by %s", shortURL(u), d.Rule)
	}
	host := strings.ToLower(u.Hostname())
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "resolve %s: %v", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	if g.pol.NeedsIPs(u) {
		if d := g.pol.Check(u, ips); !d.Allowed {
			return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s is blocked by %s", shortURL(u), d.Rule)
		}
	}
	g.mu.Lock()
	g.pinned[host] = ips
	g.mu.Unlock()
	return nil
}

// client returns an HTTP client that connects only to addresses g
// checked, checks every redirect (at most httpMaxRedirects) and sends no
// Referer on one; onRedirect, when set, sees each redirect that passed
// and may refuse it (a *bus.Error) or change its headers.
func (g *httpGuard) client(onRedirect func(next *http.Request) error) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            g.dial,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 1 << 20,
		},
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			// Go sets the previous URL, query and secrets included.
			next.Header.Del("Referer")
			if len(via) >= httpMaxRedirects {
				return bus.Errorf(commonv1.ErrorCode_NAVIGATION_FAILED, "stopped after %d redirects (last to %s)", httpMaxRedirects, shortURL(next.URL))
			}
			if onRedirect != nil {
				if err := onRedirect(next); err != nil {
					return err
				}
			}
			if err := g.check(next.Context(), next.URL); err != nil {
				return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "redirect to %s refused: %s", shortURL(next.URL), busMessage(err))
			}
			return nil
		},
	}
}

func (g *httpGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if g.pol == nil {
		return d.DialContext(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	ips := g.pinned[strings.ToLower(host)]
	g.mu.Unlock()
	if len(ips) == 0 {
		return nil, bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s was not checked against the URL policy", host)
	}
	var errs []error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
