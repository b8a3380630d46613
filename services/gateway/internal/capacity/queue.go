package capacity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/fleet"
)

// The open queue: when no worker can take a new browser session and
// nothing could be reclaimed (capacity.go), a call may wait for one instead
// of failing at once, as browserless queues its connections. It is off
// unless --open-queue is set: then at most that many calls wait, each for
// at most --open-queue-timeout (and never past its own deadline), served
// in the order they came. Only the call at the head of the queue asks the
// fleet, every openQueuePoll (capacity frees up on any gateway or worker:
// a session closed, a worker added); the others wait for their turn. A
// waiting call hears its place (its Progress) in the queue whenever it changes and every few seconds.
//
// The queue is per gateway: with several gateways each keeps its own
// order, and the heads race for a freed slot.

const (
	// openQueuePoll is how often the head of the queue asks the fleet.
	openQueuePoll = 250 * time.Millisecond
	// openQueueNotify is how often a waiting call hears that it still
	// waits when its place has not changed.
	openQueueNotify = 5 * time.Second
)

// openQueue orders the calls waiting for a browser session.
type openQueue struct {
	mu      sync.Mutex
	max     int
	waiting []*openTicket
}

// openTicket is one waiting call; turn is closed when it heads the queue.
type openTicket struct {
	turn chan struct{}
}

// join puts a call at the end of the queue, or reports false when the
// queue is full.
func (q *openQueue) join() (*openTicket, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) >= q.max {
		return nil, false
	}
	t := &openTicket{turn: make(chan struct{})}
	if len(q.waiting) == 0 {
		close(t.turn)
	}
	q.waiting = append(q.waiting, t)
	return t, true
}

// leave takes t out of the queue and gives the turn to the next.
func (q *openQueue) leave(t *openTicket) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiting {
		if w != t {
			continue
		}
		q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
		if i == 0 && len(q.waiting) > 0 {
			close(q.waiting[0].turn)
		}
		return
	}
}

// place is t's place in the queue, 1 for the head.
func (q *openQueue) place(t *openTicket) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiting {
		if w == t {
			return i + 1
		}
	}
	return 0
}

// Len is how many calls wait.
func (q *openQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// waitForRoom queues a call that found no capacity (full) until the fleet
// opens a session for it, the queue timeout, or the call's deadline. open
// asks the fleet (and reclaims) once.
func (k *Keeper) waitForRoom(ctx context.Context, progress dispatch.Progress, full *fleet.CapacityError, open func() (worker, session string, err error)) (string, string, error) {
	t, ok := k.queue.join()
	if !ok {
		return "", "", dispatch.ToolErrorf("%v; %d calls already wait for a browser session, the most this gateway queues (its --open-queue)", full, k.cfg.OpenQueue)
	}
	defer k.queue.leave(t)
	start := time.Now()
	limit := time.NewTimer(k.cfg.OpenQueueTimeout)
	defer limit.Stop()
	poll := time.NewTicker(openQueuePoll)
	defer poll.Stop()
	said, saidAt := 0, time.Time{}
	turn, try := t.turn, false // turn is nil once this call heads the queue
	for {
		if place := k.queue.place(t); place != said || time.Since(saidAt) >= openQueueNotify {
			k.notifyQueue(ctx, progress, place, time.Since(start))
			said, saidAt = place, time.Now()
		}
		if try {
			worker, session, err := open()
			var ce *fleet.CapacityError
			if !errors.As(err, &ce) {
				return worker, session, err
			}
			full = ce
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-limit.C:
			return "", "", dispatch.ToolErrorf("%v; this call waited %s in the gateway's open queue (its --open-queue-timeout) and no session came free",
				full, k.cfg.OpenQueueTimeout)
		case <-turn:
			turn, try = nil, true
		case <-poll.C:
			try = turn == nil
		}
	}
}

// notifyQueue tells a waiting call's caller its place in the queue, as a
// progress report.
func (k *Keeper) notifyQueue(ctx context.Context, progress dispatch.Progress, place int, waited time.Duration) {
	msg := fmt.Sprintf("every browser worker is full: waiting for a session, place %d in the queue, %s so far", place, waited.Round(time.Second))
	if err := progress.Report(ctx, waited.Seconds(), k.cfg.OpenQueueTimeout.Seconds(), msg); err != nil {
		k.log.InfoContext(ctx, "send open queue progress", "err", err)
	}
}
