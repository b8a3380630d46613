package fleet

// Placement: every worker publishes its headroom on sov.browser.load
// (WorkerLoad, every second and after each open or close). The fleet
// keeps the latest report of each, and a new session goes to the
// accepting worker with the most free slots (its limit minus its open
// sessions minus the opens this gateway sent it since its report), its
// memory counting too: a worker whose available memory above its
// threshold holds fewer sessions than its free slots (at sessionMemory
// each) offers only those. Reports older than loadFresh are ignored; with
// none, an open goes to the open queue group as before.

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

const (
	// loadFresh is how old a load report may be to count.
	loadFresh = 3 * time.Second
	// sessionMemory is what one more session is assumed to need.
	sessionMemory = 100 << 20
)

type loads struct {
	mu sync.Mutex
	by map[string]*workerLoad
}

type workerLoad struct {
	l       *browserv1.WorkerLoad
	at      time.Time
	pending int // opens sent since this report
}

// watchLoads follows the load reports on c; with no subscription (a closed
// connection) it knows none and every open goes to the queue group.
func watchLoads(c *bus.Conn) *loads {
	ls := &loads{by: make(map[string]*workerLoad)}
	if c == nil || c.NATS() == nil {
		return ls
	}
	_, _ = c.NATS().Subscribe(browserbus.Load(c), func(m *nats.Msg) {
		var l browserv1.WorkerLoad
		if proto.Unmarshal(m.Data, &l) != nil || l.GetWorkerId() == "" {
			return
		}
		ls.mu.Lock()
		ls.by[l.GetWorkerId()] = &workerLoad{l: &l, at: time.Now()}
		ls.mu.Unlock()
	})
	return ls
}

// free is how many more sessions the worker is thought to take.
func (wl *workerLoad) free() int {
	l := wl.l
	if !l.GetAccepting() {
		return 0
	}
	n := int(l.GetMaxSessions()-l.GetSessions()) - wl.pending
	if avail := l.GetMemAvailableBytes(); avail > 0 {
		n = min(n, int((avail-l.GetMemMinFreeBytes())/sessionMemory))
	}
	return max(n, 0)
}

// pick returns the worker with the most headroom and counts one open
// towards it, or "" when no fresh report shows room.
func (ls *loads) pick() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	var best *workerLoad
	bestFree := 0
	for id, wl := range ls.by {
		if now.Sub(wl.at) > loadFresh {
			delete(ls.by, id)
			continue
		}
		// Ties go to whichever comes first in the map's random order.
		if f := wl.free(); f > bestFree {
			best, bestFree = wl, f
		}
	}
	if best == nil {
		return ""
	}
	best.pending++
	return best.l.GetWorkerId()
}

// setAside forgets worker id's report: it answered full or not at all.
func (ls *loads) setAside(id string) {
	ls.mu.Lock()
	delete(ls.by, id)
	ls.mu.Unlock()
}

// Spread returns the sessions each worker reported last (fresh reports
// only), for tests and the bench.
func (f *Fleet) Spread() map[string]int {
	f.loads.mu.Lock()
	defer f.loads.mu.Unlock()
	out := make(map[string]int, len(f.loads.by))
	for id, wl := range f.loads.by {
		if time.Since(wl.at) <= loadFresh {
			out[id] = int(wl.l.GetSessions())
		}
	}
	return out
}
