package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
)

// TestLighthouseSourceMapPolicy: Lighthouse fetches the source maps a
// page names (and robots.txt, which may redirect) with Network.loadNetworkResource, from the
// browser, on its own DevTools connection. A page may name a source map on
// a host the session's URL policy refuses: that fetch must be refused too.
func TestLighthouseSourceMapPolicy(t *testing.T) {
	t.Parallel()
	dir := lighthouseDir(t)
	f := newFleet(t)
	f.worker(browser.Config{ID: "lhp", MaxSessions: 1, LighthouseDir: dir})
	var evil atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>maps</title><script src="/app.js"></script><p>x</p>`)
	})
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, "var a = 1;\n//# sourceMappingURL=http://localhost:%s/evil.map\n", r.URL.Query().Get("port"))
	})
	mux.HandleFunc("/evil.map", func(w http.ResponseWriter, r *http.Request) {
		evil.Add(1)
		fmt.Fprint(w, `{"version":3,"sources":[],"mappings":""}`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(ts.URL, "http://"), ":")
	// robots.txt, which Lighthouse fetches for the SEO audit, redirects to
	// the refused host.
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+port+"/evil.map", http.StatusFound)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>maps</title><script src="/app.js?port=%s"></script><p>x</p>`, port)
	})
	p := enforced(true, &browserv1.UrlRules{Tier: "global", Allow: []string{"127.0.0.1"}})
	s := f.openWith(p)
	open := openReq(ts.URL + "/page")
	open.Policy = p
	if _, err := f.call(s, open); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"snapshot", "navigation"} {
		req := lighthouseReq(mode, "desktop", "json")
		req.Policy = p
		res, _, err := f.lighthouseCall(s, req)
		if err != nil {
			t.Fatal(err)
		}
		if n := evil.Load(); n > 0 {
			var rep string
			for _, c := range res.GetContent() {
				if r := c.GetResource(); r != nil {
					rep = string(r.GetData())
				}
			}
			i := strings.Index(rep, "evil.map")
			t.Errorf("%s audit: the policy refuses localhost, yet Lighthouse fetched http://localhost:%s/evil.map %d times (report: …%s…)", mode, port, n, rep[max(0, i-200):min(len(rep), i+300)])
		}
	}
}
