package page

import (
	"sort"
	"sync"
	"testing"
	"time"
)

func TestZZWarm8(t *testing.T) {
	srv := serve(t, map[string]string{"/": `<!doctype html><title>Small</title><h1>Hello</h1><button>Go</button>`})
	for round := 0; round < 3; round++ {
		tabs := make([]*Tab, 8)
		for i := range tabs {
			tabs[i] = newTab(t, Options{})
			must(t, tabs[i], openReq("about:blank"))
		}
		time.Sleep(500 * time.Millisecond)
		var mu sync.Mutex
		var ds []time.Duration
		var wg sync.WaitGroup
		for _, tab := range tabs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				must(t, tab, openReq(srv.URL))
				mu.Lock()
				ds = append(ds, time.Since(t0))
				mu.Unlock()
			}()
		}
		wg.Wait()
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("round %d: %v", round, ds)
	}
}
