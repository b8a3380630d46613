package history

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/storetest"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
)

// TestAuditBench prints the audit trail's performance table (`make bench`):
// ingest from the stream into each backend, and query latency by session
// and by text at 100,000 and 1,000,000 records. It runs only with
// SOVEREIGN_BENCH=1; SOVEREIGN_BENCH_SIZES (e.g. "100000") and
// SOVEREIGN_BENCH_INGEST (records, default 50000) shrink it.
func TestAuditBench(t *testing.T) {
	t.Parallel()
	if os.Getenv("SOVEREIGN_BENCH") != "1" {
		t.Skip("set SOVEREIGN_BENCH=1 (make bench)")
	}
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("SOVEREIGN_BENCH_SIZES"); v != "" {
		sizes = nil
		for _, f := range splitComma(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("SOVEREIGN_BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	ingestN := 50_000
	if v := os.Getenv("SOVEREIGN_BENCH_INGEST"); v != "" {
		ingestN, _ = strconv.Atoi(v)
	}
	type row struct{ backend, measure, result, target string }
	var rows []row
	for _, backend := range []string{"sqlite", "postgres"} {
		var cfg Config
		if backend == "sqlite" {
			cfg = Config{DataDir: t.TempDir()}
		} else {
			cfg = Config{DSN: pgtest.Start(t)}
		}
		rate := benchIngest(t, cfg, ingestN)
		target := ""
		if backend == "sqlite" {
			target = "≥ 5,000 records/s"
		}
		rows = append(rows, row{backend, fmt.Sprintf("ingest, stream → %s (%d records, batches of %d)", backend, ingestN, DefaultBatch),
			fmt.Sprintf("%.0f records/s", rate), target})

		// Query latency on a separate database filled directly.
		var qcfg Config
		if backend == "sqlite" {
			qcfg = Config{DataDir: t.TempDir()}
		} else {
			qcfg = Config{DSN: pgtest.Start(t)}
		}
		st, _, err := openStore(context.Background(), qcfg)
		if err != nil {
			t.Fatal(err)
		}
		have := 0
		for _, n := range sizes {
			t0 := time.Now()
			if err := storetest.Fill(context.Background(), st, have, n, 2000); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: filled to %d records in %s", backend, n, time.Since(t0).Round(time.Millisecond))
			have = n
			for _, q := range []struct {
				name   string
				q      *historyv1.AuditQuery
				target string
			}{
				{"by session", &historyv1.AuditQuery{Session: storetest.GenSession(n / 2)}, "< 10 ms p50 at 1,000,000 (SQLite)"},
				{"by text, rare (one match)", &historyv1.AuditQuery{Text: fmt.Sprintf("order-%d ", n/3)}, ""},
				{"by text, common word", &historyv1.AuditQuery{Text: "checkout"}, ""},
			} {
				p50, p95 := latency(t, st, q.q, 200)
				tgt := ""
				if backend == "sqlite" && n == 1_000_000 {
					tgt = q.target
				}
				rows = append(rows, row{backend, fmt.Sprintf("query %s, %d records, page of 50", q.name, n),
					fmt.Sprintf("p50 %.2f ms, p95 %.2f ms", ms(p50), ms(p95)), tgt})
			}
		}
		_ = st.Close()
	}
	fmt.Println()
	fmt.Println("| backend | measure | result | target |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.backend, r.measure, r.result, r.target)
	}
	fmt.Println()
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// latency runs q n times and returns p50 and p95.
func latency(t *testing.T, st store.Store, q *historyv1.AuditQuery, n int) (time.Duration, time.Duration) {
	t.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := st.QueryAudit(ctx, q); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[n/2], lat[n*95/100]
}

// benchIngest puts n records in the audit stream while history is down,
// then starts history and returns the records per second it stored until
// the backlog was empty.
func benchIngest(t *testing.T, cfg Config, n int) float64 {
	t.Helper()
	srv := natstest.Server(t)
	c := natstest.Bus(t, srv)
	js, err := jetstream.New(c.NATS())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := audit.EnsureStreams(ctx, js, c.Prefix(), audit.StreamConfig{}, true); err != nil {
		t.Fatal(err)
	}
	subject := audit.RecordSubject(c.Prefix(), "bench")
	for i := 0; i < n; i += 1000 {
		for _, r := range storetest.Generate(i, min(1000, n-i), time.Now()) {
			data, _ := proto.Marshal(r)
			if _, err := js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatal("publishing the backlog stalled")
		}
	}
	waitBacklogN(t, js, uint64(n), time.Minute)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := New(rctx, cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	t0 := time.Now()
	go func() { _ = s.Run(rctx) }()
	waitBacklogN(t, js, 0, 10*time.Minute)
	took := time.Since(t0)
	cancel()
	return float64(n) / took.Seconds()
}

func waitBacklogN(t *testing.T, js jetstream.JetStream, want uint64, within time.Duration) {
	t.Helper()
	kittest.Eventually(t, within, func() error {
		b, err := Backlog(context.Background(), js)
		if err != nil {
			return err
		}
		return kittest.Check(b.Pending == want, "backlog = %d, want %d", b.Pending, want)
	})
}
