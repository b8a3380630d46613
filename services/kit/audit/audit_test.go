package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		n     int
		want  string
		count int
	}{
		{"hello", 10, "hello", 5},
		{"héllo wörld", 4, "héll", 11},
		{"ab\xffcd", 3, "ab\uFFFD", 5},
		{"", 3, "", 0},
	} {
		got, count := Truncate(tc.in, tc.n)
		if got != tc.want || count != tc.count {
			t.Errorf("Truncate(%q, %d) = %q, %d; want %q, %d", tc.in, tc.n, got, count, tc.want, tc.count)
		}
	}
}

func TestHideValues(t *testing.T) {
	t.Parallel()
	got := string(hideValues([]byte(`{"selector":"#pw","value":"hunter2"}`), []string{"value"}))
	if got != `{"selector":"#pw","value":"[hidden]"}` {
		t.Errorf("hideValues = %s", got)
	}
	if got := string(hideValues([]byte(`not json`), []string{"value"})); got != `"[hidden]"` {
		t.Errorf("hideValues(not json) = %s", got)
	}
}

// TestPublisherBuffersThenDrops: with no stream to take them (JetStream
// refuses the subject), records wait in the bounded buffer; beyond it they
// are dropped and counted, and Publish never blocks.
func TestPublisherBuffersThenDrops(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	nc := natstest.Conn(t, srv)
	p, err := NewPublisher(nc, PublisherConfig{Source: "test", Prefix: "sov", Buffer: 10})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	// Take the stream away: publishes now fail and are retried.
	if err := js.DeleteStream(ctx, Stream); err != nil {
		t.Fatal(err)
	}
	// Publish must not block: records beyond the buffer are dropped at
	// once, not waited for. (No "took < 2 s" here: on a loaded machine
	// 1000 non-blocking calls can take that long; a blocking Publish
	// would wait out the publisher's retries and never drop.)
	start := time.Now()
	for range 1000 {
		p.Publish(Record{Tool: "get_title", Outcome: historyv1.Outcome_OUTCOME_OK})
	}
	t.Logf("1000 publishes took %s", time.Since(start))
	if p.Dropped() < 900 {
		t.Errorf("dropped %d of 1000 with a buffer of 10: Publish must not block", p.Dropped())
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// The publisher re-creates the stream and delivers what it held.
	if err := p.Close(cctx); err != nil && !strings.Contains(err.Error(), "not accepted") {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		t.Fatalf("the publisher did not re-create the stream: %v", err)
	}
	info, _ := s.Info(ctx)
	if kept := int64(info.State.Msgs); kept+p.Dropped() != 1000 {
		t.Errorf("stream holds %d, dropped %d: %d records unaccounted for", kept, p.Dropped(), 1000-kept-p.Dropped())
	}
}
