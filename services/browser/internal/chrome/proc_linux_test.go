//go:build linux

package chrome

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestCancelStopsChildren: once Start's cancel returns, none of Chromium's
// processes runs, its child processes included: the network service
// outlived the browser process and wrote into the user data directory
// after the worker removed it (a profile session's copy came back as
// Default/Cache/Cache_Data).
func TestCancelStopsChildren(t *testing.T) {
	p, err := Find("")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		_, _ = w.Write([]byte("<title>hi</title>"))
	}))
	defer srv.Close()
	for range 3 {
		// A user data directory of its own and a page over HTTP: the
		// network service writes the page into the cache there.
		bctx, cancel, err := StartWrapped(context.Background(), p, SandboxAuto, nil, chromedp.UserDataDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		pid := chromedp.FromContext(bctx).Browser.Process().Pid
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL)); err != nil {
			cancel()
			t.Fatal(err)
		}
		if !groupRuns(pid) {
			cancel()
			t.Fatalf("no process runs in Chromium's process group %d", pid)
		}
		cancel()
		if groupRuns(pid) {
			t.Fatalf("processes of Chromium's process group %d run after its cancel returned", pid)
		}
	}
}
