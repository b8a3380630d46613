package browser_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
)

// TestPopupAlertBeforeAdoption: a popup that calls alert() before the
// session adopts it does not wedge tab_list.
func TestPopupAlertBeforeAdoption(t *testing.T) {
	f := newFleet(t)
	f.worker(browser.Config{ID: "popalert", MaxSessions: 2})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>opener</title><a href="/pop?10" target="_blank">pop</a>`)
	})
	mux.HandleFunc("/pop", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>pop</title><script>setTimeout(() => alert('hello from the popup'), +location.search.slice(1) || 0)</script>`)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := f.mustOpen()
	f.mustCall(s, openReq(ts.URL+"/"))
	start := time.Now()
	got := f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_Click{Click: &browserv1.Element{By: &browserv1.Element_Selector{Selector: "a"}}}})
	t.Logf("click (%s): %s", time.Since(start), got)
	start = time.Now()
	got = f.mustCall(s, &browserv1.ToolRequest{Tool: &browserv1.ToolRequest_TabList{TabList: &browserv1.NoArgs{}}})
	t.Logf("tab_list (%s): %s", time.Since(start), got)
	if !strings.Contains(got, `"pop"`) {
		t.Fatalf("tab_list = %q", got)
	}
}
