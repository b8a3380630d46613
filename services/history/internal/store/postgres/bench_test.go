package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/storetest"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
)

// benchRecords is the size of the database the query benchmarks use:
// HISTORY_BENCH_RECORDS, default 100,000.
func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("HISTORY_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func BenchmarkInsertAudit(b *testing.B) {
	s, err := Open(context.Background(), pgtest.Start(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := storetest.Fill(context.Background(), s, 0, 20_000, 1000); err != nil {
		b.Fatal(err)
	}
	storetest.BenchInsert(b, s, 20_000, 500)
}

func BenchmarkQueryAudit(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.Start(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := benchRecords()
	t0 := time.Now()
	if err := storetest.Fill(ctx, s, 0, n, 1000); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d records in %v", n, time.Since(t0))
	if _, err := s.pool.Exec(ctx, `ANALYZE audit`); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("HISTORY_BENCH_PLANS") != "" {
		for name, q := range storetest.Queries(n) {
			f, err := store.ParseAuditQuery(q)
			if err != nil {
				b.Fatal(err)
			}
			query, args := store.AuditSQL(f, dialect)
			rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+query, args...)
			if err != nil {
				b.Fatal(err)
			}
			var lines []string
			for rows.Next() {
				var l string
				rows.Scan(&l)
				lines = append(lines, l)
			}
			rows.Close()
			b.Logf("%s:\n%s", name, strings.Join(lines, "\n"))
		}
	}
	storetest.BenchQueries(b, s, n)
}
