package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/e2e/harness"
)

// TestCorpus runs the todo task (add three items, complete one, filter)
// through MCP on every app of the compatibility corpus: real apps written
// by others (harness.CorpusApps). Every task must pass.
func TestCorpus(t *testing.T) {
	t.Parallel()
	dir, err := harness.CorpusDir()
	if err != nil {
		t.Fatal(err)
	}
	srv := harness.ServeCorpus(dir)
	defer srv.Close()
	f := startFleet(t, fleetSpec{workers: 1, gateways: 1, maxSessions: 4})
	url := f.Gateways[0].MCP
	var calls int
	var toolTime time.Duration
	var snapChars int
	for _, app := range harness.CorpusApps {
		t.Run(app, func(t *testing.T) {
			ctx := callCtx(t, 2*time.Minute)
			c := initClient(t, ctx, url)
			defer c.Delete(context.Background())
			st, err := harness.RunTodoTask(ctx, harness.SovereignDriver{C: c}, srv.URL+"/"+app+"/index.html")
			if err != nil {
				t.Fatalf("%s: %v", app, err)
			}
			calls, toolTime, snapChars = calls+st.Calls, toolTime+st.ToolTime, snapChars+st.SnapshotChars
		})
	}
	n := len(harness.CorpusApps)
	t.Logf("corpus of %d apps: %.1f calls/task, %s tool time/task, %d snapshot characters/task",
		n, float64(calls)/float64(n), (toolTime / time.Duration(n)).Round(time.Millisecond), snapChars/n)
}
