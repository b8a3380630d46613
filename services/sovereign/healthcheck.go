package sovereign

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
)

// healthcheck GETs a health URL and succeeds on 200: what container
// healthchecks run in images that have no shell or curl
// (`sovereign healthcheck http://127.0.0.1:8080/readyz`).
func healthcheck(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sovereign healthcheck", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sovereign healthcheck [--timeout 3s] http://127.0.0.1:PORT/readyz")
	}
	if err := fs.Parse(args); err != nil {
		return app.UsageError{Err: err}
	}
	if fs.NArg() != 1 {
		return app.UsageError{Err: errors.New("healthcheck needs exactly one URL, e.g. http://127.0.0.1:8080/readyz")}
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return app.UsageError{Err: fmt.Errorf("healthcheck: %q is not an http(s) URL", fs.Arg(0))}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(out, "%s: %s\n", u, strings.TrimSpace(string(body)))
	return nil
}
