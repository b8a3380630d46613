package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/history/internal/store/storetest"
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
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// Start from a non-empty table, as in use.
	if err := storetest.Fill(context.Background(), s, 0, 20_000, 1000); err != nil {
		b.Fatal(err)
	}
	storetest.BenchInsert(b, s, 20_000, 500)
}

var (
	filledOnce sync.Once
	filled     string
	filledErr  error
	filledDir  string
)

// filledStore opens a database with benchRecords records, made once per
// benchmark run, or kept in HISTORY_BENCH_DB when that is set (made when
// missing: a later run with the same size reuses it).
func filledStore(b *testing.B) *Store {
	filledOnce.Do(func() {
		if filled = os.Getenv("HISTORY_BENCH_DB"); filled != "" {
			if _, err := os.Stat(filled); err == nil {
				return
			}
		} else {
			filledDir, filledErr = os.MkdirTemp("", "history-bench-")
			if filledErr != nil {
				return
			}
			filled = filepath.Join(filledDir, "bench.db")
		}
		var s *Store
		if s, filledErr = Open(context.Background(), filled); filledErr != nil {
			return
		}
		t0 := time.Now()
		filledErr = storetest.Fill(context.Background(), s, 0, benchRecords(), 1000)
		b.Logf("filled %d records in %v", benchRecords(), time.Since(t0))
		s.Close()
	})
	if filledErr != nil {
		b.Fatal(filledErr)
	}
	s, err := Open(context.Background(), filled)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkQueryAudit(b *testing.B) {
	storetest.BenchQueries(b, filledStore(b), benchRecords())
}

func TestMain(m *testing.M) {
	code := m.Run()
	if filledDir != "" {
		os.RemoveAll(filledDir)
	}
	os.Exit(code)
}
