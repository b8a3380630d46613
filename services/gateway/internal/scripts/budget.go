package scripts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// memPoll is how often the memory watchdog samples the heap.
const memPoll = 5 * time.Millisecond

// gcEvery is how often, at most, a watchdog forces a collection to tell
// live memory from garbage (process-wide).
const gcEvery = 250 * time.Millisecond

var abandoned atomic.Int64

// Abandoned is how many interpreters did not stop after their interrupt
// and were left to finish on their own since the process started (for a
// metric: each one costs CPU until its native step ends).
func Abandoned() int64 { return abandoned.Load() }

// A budgetError is why a load or call was stopped.
type budgetError struct{ msg string }

func (e *budgetError) Error() string { return e.msg }

// guard runs fn, which drives vm, on a goroutine of its own (with a
// context that ends with the budget), and
// interrupts vm when ctx ends, when budget passes or when the heap grows by
// more than memory. It returns fn's error, or the reason it was stopped
// (a *budgetError). If vm does not stop within grace after the interrupt,
// guard returns without it (see [Abandoned]).
func guard(ctx context.Context, vm *goja.Runtime, budget time.Duration, memory int64, grace time.Duration, log *slog.Logger, fn func(ctx context.Context) error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				log.Error("script interpreter panicked", "panic", p, "stack", string(debug.Stack()))
				done <- fmt.Errorf("the script interpreter failed: %v", p)
			}
		}()
		done <- fn(ctx)
	}()

	w := newMemWatch(memory)
	tick := time.NewTicker(memPoll)
	defer tick.Stop()
	var why *budgetError
	for why == nil {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				why = &budgetError{fmt.Sprintf("stopped: the caller gave up (%v)", err)}
			} else {
				why = &budgetError{fmt.Sprintf("stopped: over its time budget of %s (an endless loop?)", budget)}
			}
		case <-tick.C:
			if grown, over := w.over(); over {
				why = &budgetError{fmt.Sprintf("stopped: over its memory budget of %s (the heap grew by %s while it ran)",
					mib(uint64(memory)), mib(grown))}
			}
		}
	}
	vm.Interrupt(why)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		var ie *goja.InterruptedError
		if err == nil || !errors.As(err, &ie) {
			return err // it ended on its own as it was stopped
		}
		return why
	case <-t.C:
		abandoned.Add(1)
		log.Error("script interpreter did not stop after its interrupt; abandoning it (it runs on until its native step ends)",
			"reason", why.msg, "grace", grace.String(), "abandoned_total", abandoned.Load())
		return &budgetError{why.msg + fmt.Sprintf("; the interpreter did not stop within %s and was abandoned", grace)}
	}
}

// mib renders bytes as MiB with one decimal.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// memWatch tells whether the live heap grew by more than a limit since
// it was made.
type memWatch struct {
	limit uint64
	base  uint64 // live heap at the start
	s     []metrics.Sample
}

const (
	metricObjects = "/memory/classes/heap/objects:bytes" // live and not yet swept
	metricLive    = "/gc/heap/live:bytes"                // live at the last collection
)

// newMemWatch takes the live heap as the base, after a collection (forced
// unless one was forced less than gcEvery ago), so that garbage left by
// earlier work does not count for this one.
func newMemWatch(limit int64) *memWatch {
	return &memWatch{limit: uint64(limit), base: liveHeap(), s: []metrics.Sample{{Name: metricObjects}}}
}

// over reports the growth and whether it is over the limit. The heap's
// objects (cheap to read) count garbage too, so a growth over the limit is
// confirmed with the live heap after a collection.
func (w *memWatch) over() (uint64, bool) {
	metrics.Read(w.s)
	if w.s[0].Value.Kind() == metrics.KindUint64 && w.s[0].Value.Uint64() <= w.base+w.limit {
		return 0, false
	}
	live := liveHeap()
	if live <= w.base+w.limit {
		return 0, false
	}
	return live - w.base, true
}

var gcState struct {
	sync.Mutex
	last time.Time
}

// liveHeap is the live heap after a collection, forcing one unless one
// was forced less than gcEvery ago.
func liveHeap() uint64 {
	gcState.Lock()
	if time.Since(gcState.last) >= gcEvery {
		runtime.GC()
		gcState.last = time.Now()
	}
	gcState.Unlock()
	s := []metrics.Sample{{Name: metricLive}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
