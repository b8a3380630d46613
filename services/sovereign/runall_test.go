package sovereign

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// fakeService records when its Close is called.
type fakeService struct {
	name string
	log  *eventLog
	fail error // Run returns it at once
	life app.Lifetime
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (s *fakeService) Run(ctx context.Context) error {
	return s.life.Run(ctx, func(ctx context.Context) error {
		if s.fail != nil {
			return s.fail
		}
		<-ctx.Done()
		return nil
	})
}

func (s *fakeService) Close(ctx context.Context) error {
	err := s.life.Stop(ctx)
	s.log.add("closed " + s.name)
	return err
}

func TestRunAll(t *testing.T) {
	t.Parallel()
	noConn := func(string) (*bus.Conn, func(), error) { return nil, func() {}, nil }
	steps := func(log *eventLog, fail error, names ...string) []step {
		var out []step
		for i, n := range names {
			out = append(out, step{n, func(context.Context, *bus.Conn) (app.Service, error) {
				s := &fakeService{name: n, log: log}
				if i == len(names)-1 {
					s.fail = fail
				}
				return s, nil
			}})
		}
		return out
	}
	t.Run("StopsInReverse", func(t *testing.T) {
		log := &eventLog{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // up is told to stop once everything started
		if err := runAll(ctx, steps(log, nil, "history", "browser", "gateway"), noConn); err != nil {
			t.Fatalf("runAll() = %v, want nil", err)
		}
		want := []string{"closed gateway", "closed browser", "closed history"}
		if !slices.Equal(log.events, want) {
			t.Errorf("events = %q, want %q", log.events, want)
		}
	})
	t.Run("FailedRunStopsAll", func(t *testing.T) {
		log := &eventLog{}
		boom := errors.New("boom")
		if err := runAll(context.Background(), steps(log, boom, "history", "gateway"), noConn); !errors.Is(err, boom) {
			t.Fatalf("runAll() = %v, want %v", err, boom)
		}
		if !slices.Contains(log.events, "closed history") {
			t.Errorf("events = %q, want history closed", log.events)
		}
	})
	t.Run("FailedStartClosesStarted", func(t *testing.T) {
		log := &eventLog{}
		boom := errors.New("no start")
		st := append(steps(log, nil, "history"), step{"gateway", func(context.Context, *bus.Conn) (app.Service, error) {
			return nil, boom
		}})
		if err := runAll(context.Background(), st, noConn); !errors.Is(err, boom) {
			t.Fatalf("runAll() = %v, want %v", err, boom)
		}
		if want := []string{"closed history"}; !slices.Equal(log.events, want) {
			t.Errorf("events = %q, want %q", log.events, want)
		}
	})
}
