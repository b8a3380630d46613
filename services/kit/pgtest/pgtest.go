// Package pgtest runs a throwaway PostgreSQL server for tests: Start gives a
// test its own new database on a server this process started itself
// (initdb in a temporary directory, postgres on 127.0.0.1 and a free port),
// so no setup outside the test is needed beyond the PostgreSQL binaries
// (scripts/deps.sh postgres installs them).
//
// With Main in the package's TestMain, every test shares one server (initdb
// is the slow part) and the server stops when the tests end; without it,
// each Start starts and stops a server of its own.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned when initdb, pg_ctl and postgres are not found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in PATH or /usr/lib/postgresql/*/bin: run scripts/deps.sh postgres")

var (
	mainMode  bool
	once      sync.Once
	shared    *Server
	sharedErr error
)

// Main runs the package's tests with one shared server, stopped at the end.
// Use it as: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	mainMode = true
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// Start returns the DSN of a new, empty database for t, dropped when t
// ends. Without the binaries it skips t, or fails it when the environment
// variable CI is "true".
func Start(t testing.TB) string {
	t.Helper()
	var (
		srv *Server
		err error
	)
	if mainMode {
		once.Do(func() { shared, sharedErr = NewServer() })
		srv, err = shared, sharedErr
	} else if srv, err = NewServer(); err == nil {
		t.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if errors.Is(err, ErrNoBinaries) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, dsn, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.DropDatabase(ctx, name); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// Server is a running PostgreSQL server in a temporary directory.
type Server struct {
	dir  string // removed by Stop
	data string
	bin  string
	port int
	cred *syscall.Credential // the postgres user's, when we are root
	// watchdog stops the server and removes dir should this process die
	// without Stop (a test binary killed on timeout).
	watchdog *exec.Cmd
	dbs      atomic.Int64
	mu       sync.Mutex // CREATE DATABASE one at a time
}

// Binaries returns the directory with initdb, pg_ctl and postgres, or
// ErrNoBinaries.
func Binaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first.
	sort.Slice(found, func(i, j int) bool { return pgMajor(found[i]) > pgMajor(found[j]) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		ok := true
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// NewServer initializes a cluster in a new temporary directory and starts
// it, tuned for tests (no fsync, trust authentication, superuser
// "postgres"). Stop it with Stop.
func NewServer() (*Server, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs a postgres system user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	// Our own directory, not t.TempDir (0700 and owned by root): the
	// postgres user must reach it.
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := s.initdb(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err = s.start()
		if err == nil {
			s.watch()
			return s, nil
		}
		if attempt == 2 {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
}

func (s *Server) initdb() error {
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	s.data = filepath.Join(s.dir, "data")
	// C.UTF-8 so that ILIKE folds the case of all of Unicode, as the
	// SQLite store does; plain C where that locale is missing.
	var out []byte
	var err error
	for _, locale := range []string{"--locale=C.UTF-8", "--no-locale"} {
		os.RemoveAll(s.data)
		out, err = s.command("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", locale, "--no-sync").CombinedOutput()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
}

func (s *Server) start() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories='%s' "+
		"-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", s.port, s.data)
	log := filepath.Join(s.dir, "postgres.log")
	out, err := s.command("pg_ctl", "-D", s.data, "-l", log, "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
	if err != nil {
		logText, _ := os.ReadFile(log)
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, tail(string(logText), 2000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			s.Stop()
			return fmt.Errorf("pgtest: server does not accept connections: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// command runs one of the server binaries, as the postgres user when we
// are root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(cmd.Env, "HOME="+s.dir, "USER=postgres", "LOGNAME=postgres")
	}
	return cmd
}

// DSN is the URL of database name as the superuser.
func (s *Server) DSN(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

// CreateDatabase creates a new, empty database and returns its name and
// DSN.
func (s *Server) CreateDatabase(ctx context.Context) (name, dsn string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name = fmt.Sprintf("test_%d", s.dbs.Add(1))
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", "", fmt.Errorf("pgtest: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return name, s.DSN(name), nil
}

// DropDatabase drops a database, disconnecting its sessions.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtest: drop database: %w", err)
	}
	return nil
}

// watch starts the watchdog: a shell that waits for this process to end
// and then stops the server and removes its directory. Stop ends it first.
func (s *Server) watch() {
	script := fmt.Sprintf(`while [ -d /proc/%d ]; do sleep 1; done; "$0" -D "$1" -m immediate stop >/dev/null 2>&1; rm -rf "$2"`, os.Getpid())
	cmd := exec.Command("/bin/sh", "-c", script, filepath.Join(s.bin, "pg_ctl"), s.data, s.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if cmd.Start() == nil {
		s.watchdog = cmd
	}
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() error {
	if s.watchdog != nil {
		syscall.Kill(-s.watchdog.Process.Pid, syscall.SIGKILL) // the shell and its sleep
		s.watchdog.Wait()
	}
	var errs []error
	if out, err := s.command("pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "Is server running?") {
		errs = append(errs, fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out))
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}
