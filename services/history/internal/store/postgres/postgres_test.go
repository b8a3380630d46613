package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/history/internal/store"
	"github.com/sovereign-fleet/sovereign/services/history/internal/store/storetest"
	"github.com/sovereign-fleet/sovereign/services/kit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T) store.Store {
	s, err := Open(t.Context(), pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopen opens one database at any schema version.
func reopen(t *testing.T) func(int) (store.Store, error) {
	dsn := pgtest.Start(t)
	return func(version int) (store.Store, error) {
		s, err := OpenAt(context.Background(), dsn, version)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	}
}

func TestStore(t *testing.T) {
	storetest.Run(t, open, storetest.Upgrade(reopen))
}
