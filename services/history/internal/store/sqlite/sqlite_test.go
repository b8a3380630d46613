package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/storetest"
)

// opener opens stores whose text queries check scan records one by one
// before they use the index.
func opener(scan int) (open func(*testing.T) store.Store, reopen func(*testing.T) func(int) (store.Store, error)) {
	open = func(t *testing.T) store.Store {
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "history.db"))
		if err != nil {
			t.Fatal(err)
		}
		s.scanFirst = scan
		t.Cleanup(func() { s.Close() })
		return s
	}
	// One database file at any schema version.
	reopen = func(t *testing.T) func(int) (store.Store, error) {
		path := filepath.Join(t.TempDir(), "history.db")
		return func(version int) (store.Store, error) {
			s, err := OpenAt(context.Background(), path, version)
			if err != nil {
				return nil, err
			}
			s.scanFirst = scan
			t.Cleanup(func() { s.Close() })
			return s, nil
		}
	}
	return open, reopen
}

func TestStore(t *testing.T) {
	t.Parallel()
	for name, scan := range map[string]int{"Default": scanFirst, "IndexOnly": 0, "Scan3": 3} {
		t.Run(name, func(t *testing.T) {
			open, reopen := opener(scan)
			storetest.Run(t, open, storetest.Upgrade(reopen))
		})
	}
}

func TestFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a", "b", "history.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database file mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v", fi.Mode().Perm(), err)
	}
	var mode string
	if err := s.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v", mode, err)
	}
	var fk int
	if err := s.r.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Errorf("reader foreign_keys %d, %v", fk, err)
	}
	if _, err := Open(t.Context(), ":memory:"); err == nil {
		t.Error(":memory: opened")
	}
}
