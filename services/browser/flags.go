package browser

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// RegisterFlags adds the worker's flags to fs, each with its SOVEREIGN_*
// environment fallback, and returns the Config they fill. Malformed
// environment values are appended to errs.
func RegisterFlags(fs *flag.FlagSet, errs *[]error) *Config {
	cfg := &Config{}
	fs.StringVar(&cfg.ID, "worker-id", config.Env("SOVEREIGN_WORKER_ID", ""), "worker id used in subjects (default: host name and a random suffix) [SOVEREIGN_WORKER_ID]")
	fs.StringVar(&cfg.Chrome, "chrome", config.Env("SOVEREIGN_CHROME", ""), "Chromium to drive: auto (Debian's chromium-headless-shell when installed, else chromium on PATH), headless-shell, full (the full browser on PATH), or the executable's path [SOVEREIGN_CHROME]")
	fs.StringVar(&cfg.ChromeSandbox, "chrome-sandbox", config.Env("SOVEREIGN_CHROME_SANDBOX", "auto"), "Chromium's own sandbox: auto (on unless root), on, or off (the container is then the only wall; for runtimes whose seccomp forbids user namespaces) [SOVEREIGN_CHROME_SANDBOX]")
	fs.IntVar(&cfg.MaxSessions, "max-sessions", config.MustInt(errs, "SOVEREIGN_MAX_SESSIONS", 16), "sessions one worker holds at most [SOVEREIGN_MAX_SESSIONS]")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", config.MustDuration(errs, "SOVEREIGN_IDLE_TIMEOUT", 10*time.Minute), "close a session after this long without a call [SOVEREIGN_IDLE_TIMEOUT]")
	fs.IntVar(&cfg.WarmSessions, "warm-sessions", config.MustInt(errs, "SOVEREIGN_WARM_SESSIONS", 0), "browser contexts kept ready for new sessions (renderer started, about:blank loaded); 0: min(2, --max-sessions); negative: none. Open plus warm never exceed --max-sessions [SOVEREIGN_WARM_SESSIONS]")
	fs.Func("min-free-memory-mb", "take no new session while less memory than this is available (MiB; the host's MemAvailable or what the cgroup limit leaves, the lesser), so Chromium is not OOM-killed; default 256, negative: never [SOVEREIGN_MIN_FREE_MEMORY_MB]", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		cfg.MinFreeMemory = mib(n)
		return nil
	})
	cfg.MinFreeMemory = mib(int64(config.MustInt(errs, "SOVEREIGN_MIN_FREE_MEMORY_MB", 256)))
	fs.DurationVar(&cfg.CheckpointEvery, "checkpoint-every", config.MustDuration(errs, "SOVEREIGN_CHECKPOINT_EVERY", 3*time.Second), "longest a session goes without a checkpoint into the fleet, so it can be restored when its worker dies (needs the operator secret key); a change is checkpointed within 0.5s; negative: no checkpoints [SOVEREIGN_CHECKPOINT_EVERY]")
	fs.DurationVar(&cfg.CheckpointTTL, "checkpoint-ttl", config.MustDuration(errs, "SOVEREIGN_CHECKPOINT_TTL", time.Hour), "how long a session checkpoint outlives its last write [SOVEREIGN_CHECKPOINT_TTL]")
	fs.IntVar(&cfg.ConsoleBuffer, "console-buffer", config.MustInt(errs, "SOVEREIGN_CONSOLE_BUFFER", 500), "console messages each tab keeps for console_messages (the oldest go first) [SOVEREIGN_CONSOLE_BUFFER]")
	fs.IntVar(&cfg.NetworkBuffer, "network-buffer", config.MustInt(errs, "SOVEREIGN_NETWORK_BUFFER", 500), "requests each tab keeps for network_requests (the oldest go first) [SOVEREIGN_NETWORK_BUFFER]")
	sizeFlag(fs, errs, &cfg.MaxPDFBytes, "max-pdf-mb", "SOVEREIGN_MAX_PDF_MB", 10, 20, "largest PDF the pdf tool returns (MiB)")
	sizeFlag(fs, errs, &cfg.MaxProfileFileBytes, "max-profile-file-mb", "SOVEREIGN_MAX_PROFILE_FILE_MB", 20, 20,
		"largest file (gzipped) performance_stop and heap_snapshot attach; a larger one is left out (MiB)")
	sizeFlag(fs, errs, &cfg.MaxProfileReadBytes, "max-profile-read-mb", "SOVEREIGN_MAX_PROFILE_READ_MB", 128, 20,
		"most of a trace (analysed up to there) or a heap snapshot (refused beyond it) the worker reads, uncompressed (MiB)")
	sizeFlag(fs, errs, &cfg.MaxStorageBytes, "max-storage-kb", "SOVEREIGN_MAX_STORAGE_KB", 900, 10,
		"largest saved storage (storage_save: cookies and local storage, sealed) in KiB")
	fs.StringVar(&cfg.LighthouseDir, "lighthouse-dir", config.Env("SOVEREIGN_LIGHTHOUSE_DIR", ""), "directory of the Lighthouse runner lighthouse_audit runs with node (services/browser/lighthouse after `make lighthouse`); empty: lighthouse_audit answers that Lighthouse is not installed [SOVEREIGN_LIGHTHOUSE_DIR]")
	registerFileFlags(fs, errs, cfg)     // upload limits (files.go)
	registerDownloadFlags(fs, errs, cfg) // downloads (downloads.go)
	fs.Func("allow-scheme", "URL scheme open may use besides http, https and about; repeat or comma-separate (e.g. data,file) [SOVEREIGN_ALLOW_SCHEMES]", func(v string) error {
		cfg.AllowedSchemes = appendSchemes(cfg.AllowedSchemes, v)
		return nil
	})
	if v := config.Env("SOVEREIGN_ALLOW_SCHEMES", ""); v != "" {
		cfg.AllowedSchemes = appendSchemes(cfg.AllowedSchemes, v)
	}
	// The secret key only ever comes from the environment or a file: a
	// flag would show it in the process list.
	switch k, err := secrets.LoadKey(os.Getenv); {
	case err == nil:
		cfg.SecretKey = k
	case !errors.Is(err, secrets.ErrNoKey):
		*errs = append(*errs, err)
	}
	return cfg
}

// RegisterStandaloneFlags adds the flags of a worker running as its own
// process (`sovereign browser`, cmd/browser): --listen. `sovereign up` runs
// its workers in-process and serves no listener per worker.
func RegisterStandaloneFlags(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Listen, "listen", config.Env("SOVEREIGN_BROWSER_LISTEN", "127.0.0.1:8091"), "host:port for /healthz, /readyz and /metrics; empty for none [SOVEREIGN_BROWSER_LISTEN]")
}

// sizeFlag adds a size flag counted in units of 1<<shift bytes (MiB: 20,
// KiB: 10) with its environment fallback, and sets *dst in bytes.
func sizeFlag[T int | int64](fs *flag.FlagSet, errs *[]error, dst *T, name, env string, def, shift int, usage string) {
	*dst = T(config.MustInt(errs, env, def)) << shift
	fs.Func(name, fmt.Sprintf("%s; default %d [%s]", usage, def, env), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		*dst = T(n) << shift
		return nil
	})
}

// mib is n MiB in bytes; a negative n stays negative (off).
func mib(n int64) int64 {
	if n < 0 {
		return -1
	}
	return n << 20
}

func appendSchemes(list []string, v string) []string {
	if len(list) == 0 {
		list = []string{"http", "https", "about"}
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ":"); s != "" {
			list = append(list, s)
		}
	}
	return list
}

// Serve connects to NATS at natsURL and runs a worker until ctx ends, with
// its health and metrics listener on cfg.Listen: what `sovereign browser`
// and cmd/browser do.
func Serve(ctx context.Context, cfg Config, natsURL string) error {
	cfg, err := cfg.Resolve() // the worker's ID names its connection
	if err != nil {
		return app.UsageError{Err: err}
	}
	return app.Serve(ctx, natsURL, "sovereign-browser-"+cfg.ID, func(ctx context.Context, c *bus.Conn) (*Worker, error) {
		return New(ctx, cfg, c)
	})
}
