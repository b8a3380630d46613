package browser_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// TestMemoryPressure: a worker whose available memory is below its
// threshold reports itself not accepting, leaves the open queue group and
// refuses a direct open, naming memory pressure.
func TestMemoryPressure(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	loads := make(chan *browserv1.WorkerLoad, 16)
	sub, err := f.c.NATS().Subscribe(f.c.Subject("browser", "load"), func(m *nats.Msg) {
		var l browserv1.WorkerLoad
		if proto.Unmarshal(m.Data, &l) == nil {
			select {
			case loads <- &l:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w := f.worker(browser.Config{ID: "tight", MaxSessions: 2, WarmSessions: -1, MinFreeMemory: 1 << 60})
	deadline := time.After(10 * time.Second)
	for {
		var l *browserv1.WorkerLoad
		select {
		case l = <-loads:
		case <-deadline:
			t.Fatal("no load report saying the worker does not accept sessions")
		}
		if l.GetWorkerId() == w.ID() && !l.GetAccepting() && l.GetMaxSessions() == 2 && l.GetMemAvailableBytes() > 0 {
			break
		}
	}
	_, err = f.open()
	wantCode(t, "open through the queue group", err, commonv1.ErrorCode_UNAVAILABLE, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res browserv1.OpenSessionResponse
	err = f.c.Request(ctx, f.c.Subject("browser", "w", w.ID(), "open"), &browserv1.OpenSessionRequest{Owner: "test"}, &res)
	if bus.CodeOf(err) != commonv1.ErrorCode_NO_CAPACITY || !strings.Contains(err.Error(), "memory pressure") {
		t.Fatalf("direct open under memory pressure: %v (%v), want NO_CAPACITY naming memory pressure", err, bus.CodeOf(err))
	}
}
