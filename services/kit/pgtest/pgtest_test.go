package pgtest

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestStart(t *testing.T) {
	dsns := map[string]bool{}
	for range 2 {
		dsn := Start(t)
		if dsns[dsn] {
			t.Fatalf("database %s given twice", dsn)
		}
		dsns[dsn] = true
		c, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		var ctype string
		var n int
		if err := c.QueryRow(t.Context(), `SHOW lc_ctype`).Scan(&ctype); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("new database has %d tables, %v", n, err)
		}
		t.Logf("%s: lc_ctype %s", dsn, ctype)
		c.Close(t.Context())
	}
}
