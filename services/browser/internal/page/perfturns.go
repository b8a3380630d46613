package page

import (
	"slices"
	"sync"
	"time"
)

// Chromium records one trace per browser at a time: while one target
// traces, Tracing.start from any other target, of any browser context,
// fails "Tracing has already been started (possibly in another tab)"
// (Chromium 156, with the default backend and with tracingBackend
// "chrome"; the "system" backend needs a system tracing service). A
// worker's sessions share one Chromium, so their performance recordings
// take turns: TraceTurns is a first-come, first-served queue of them, one
// per browser.
//
// A performance_start that finds the browser busy is queued and says so;
// its trace starts by itself when its turn comes (reloading the page then,
// when it asked for a reload). A recording holds the browser at most
// MaxDuration: then it is stopped, its result kept for performance_stop,
// and the next one starts. A recording whose tab goes away gives up its
// turn. Whatever a trace records of other tabs is left out of its result
// (perftrace.go), so taking turns shows no session another's pages.
//
// lighthouse_audit needs no turn: the categories its runner audits
// (accessibility, best practices, SEO) gather no trace, so Lighthouse
// never calls Tracing.start (TestLighthouseWhileRecording). A
// performance_start that still finds the browser tracing has met a
// DevTools client from outside the worker's tools, and fails.

// DefaultMaxTraceDuration is the longest a performance recording holds
// its browser when TraceTurns.MaxDuration is 0 (performance_start's
// description in the gateway's catalog says it too).
const DefaultMaxTraceDuration = 3 * time.Minute

// TraceTurns is the queue of the performance recordings of one browser
// (Options.Traces, shared by all the tabs of the browser). The zero value
// is ready to use.
type TraceTurns struct {
	// MaxDuration is the longest a recording holds the browser (0:
	// DefaultMaxTraceDuration). Set it before the first recording.
	MaxDuration time.Duration

	mu     sync.Mutex
	holder *traceTurn   // the recording that holds the browser, or nil
	since  time.Time    // when holder got it
	queue  []*traceTurn // the recordings waiting, first come first
}

// traceTurn is one recording's place at the browser.
type traceTurn struct {
	q     *TraceTurns
	perf  *perfTools // the tools of the tab that records
	rec   *perfRecording
	done  chan struct{} // closed when the turn ends
	ended bool          // guarded by q.mu
}

func (q *TraceTurns) maxDuration() time.Duration {
	if q != nil && q.MaxDuration > 0 {
		return q.MaxDuration
	}
	return DefaultMaxTraceDuration
}

// join puts rec of the tab of p in line and sets rec.turn. ahead is how
// many recordings come before it: 0 when it holds the browser now (the
// caller starts its trace); otherwise its trace starts
// (perfTools.beginQueued) when its turn comes. held is how long the
// recording that holds the browser has held it.
func (q *TraceTurns) join(p *perfTools, rec *perfRecording) (ahead int, held time.Duration) {
	tu := &traceTurn{q: q, perf: p, rec: rec, done: make(chan struct{})}
	// Before the turn's watch starts: a turn that ends at once (a tiny
	// MaxDuration) reads it on the watch's goroutine.
	rec.turn = tu
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.holder == nil {
		q.grantLocked(tu)
		return 0, 0
	}
	q.queue = append(q.queue, tu)
	return len(q.queue), time.Since(q.since)
}

// grantLocked gives tu the browser and starts its watch: the turn ends
// when its tab goes away, or is stopped after MaxDuration.
func (q *TraceTurns) grantLocked(tu *traceTurn) {
	q.holder, q.since = tu, time.Now()
	go q.watch(tu)
}

// watch ends tu when its tab goes away and stops its recording when it
// has held the browser for MaxDuration. It returns once the turn ended.
func (q *TraceTurns) watch(tu *traceTurn) {
	timer := time.NewTimer(q.maxDuration())
	defer timer.Stop()
	select {
	case <-tu.done:
	case <-tu.perf.tab.ctx.Done():
		tu.end()
	case <-tu.perf.tab.gone.Done():
		tu.end()
	case <-timer.C:
		tu.perf.expireTrace(tu.rec) // ends the turn
	}
}

// status says where tu stands: ahead is 0 when it holds the browser;
// held is how long the holder has held it.
func (tu *traceTurn) status() (ahead int, held time.Duration) {
	q := tu.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.holder == tu {
		return 0, time.Since(q.since)
	}
	return slices.Index(q.queue, tu) + 1, time.Since(q.since)
}

// end ends the turn, queued or holding: a holder's browser goes to the
// next recording in line, whose trace then starts. It may be called more
// than once, and on a nil turn (a tab without TraceTurns).
func (tu *traceTurn) end() {
	if tu == nil {
		return
	}
	q := tu.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if tu.ended {
		return
	}
	tu.ended = true
	close(tu.done)
	if q.holder != tu {
		q.queue = slices.DeleteFunc(q.queue, func(o *traceTurn) bool { return o == tu })
		return
	}
	q.holder = nil
	if len(q.queue) > 0 {
		next := q.queue[0]
		q.queue = q.queue[1:]
		q.grantLocked(next)
		go next.perf.beginQueued(next.rec)
	}
}
