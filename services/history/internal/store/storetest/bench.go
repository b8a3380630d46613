package storetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
)

// GenBase is the time of the first record Fill stores.
var GenBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Fill stores the Generate records from..to-1 (from GenBase) in batches.
func Fill(ctx context.Context, s store.Store, from, to, batch int) error {
	for i := from; i < to; i += batch {
		recs := Generate(i, min(batch, to-i), GenBase)
		if _, err := s.InsertAudit(ctx, recs); err != nil {
			return err
		}
	}
	return nil
}

// BenchInsert measures InsertAudit with batches of batch new records into s
// (which already holds the first `from` Generate records), reporting
// ns/record and records/s.
func BenchInsert(b *testing.B, s store.Store, from, batch int) {
	ctx := context.Background()
	next := from
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		recs := Generate(next, batch, GenBase)
		next += batch
		b.StartTimer()
		n, err := s.InsertAudit(ctx, recs)
		if err != nil || n != batch {
			b.Fatalf("inserted %d of %d: %v", n, batch, err)
		}
	}
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N*batch)
	b.ReportMetric(per, "ns/record")
	b.ReportMetric(1e9/per, "records/s")
}

// Queries are typical operator queries on n Generate records.
func Queries(n int) map[string]*historyv1.AuditQuery {
	mid := GenBase.Add(time.Duration(n/2) * time.Millisecond).UnixNano()
	return map[string]*historyv1.AuditQuery{
		"Latest":        {},
		"BySession":     {Session: GenSession(n / 2)},
		"ByMCPSession":  {Session: "mcp-007"},
		"ByTool":        {Tool: "fill"},
		"ByCaller":      {Caller: "bob", UntilUnixNano: mid},
		"ErrorsOnly":    {ErrorsOnly: true},
		"TextRare":      {Text: fmt.Sprintf("order-%d ", n/3)},
		"TextCommon":    {Text: "checkout"},
		"TextURL":       {Text: "example.com/checkout/123"},
		"TextAbsent":    {Text: "no such text"},
		"SessionText":   {Session: GenSession(n / 2), Text: "login"},
		"SessionErrors": {Session: GenSession(n / 2), ErrorsOnly: true},
		"AfterSeq":      {AfterSeq: int64(n - 100)},
	}
}

// BenchQueries runs each of Queries(n) as a sub-benchmark against s, which
// holds the first n Generate records; it reports the median latency
// (p50-ms) besides the mean.
func BenchQueries(b *testing.B, s store.Store, n int) {
	qs := Queries(n)
	names := make([]string, 0, len(qs))
	for name := range qs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := qs[name]
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := s.QueryAudit(ctx, q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
