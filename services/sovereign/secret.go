package sovereign

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

const secretUsage = `sovereign secret — operator secrets that agents use as {{secrets.NAME}} without seeing them

Usage:
  sovereign secret set NAME [--from-file PATH]   set a secret: the value is read from stdin
                                                 (a hidden prompt on a terminal), never from the command line
  sovereign secret list [--json]                 names and when they were set, never values
  sovereign secret delete NAME
  sovereign secret keygen [--file PATH]          print a new key (or write it to a new 0600 file)

An agent writes {{secrets.NAME}} in a tool's arguments; the browser worker
puts the value in just before it acts and replaces the value with the
placeholder in everything it returns. Values are stored encrypted in the
NATS KV bucket sov_secrets.

The key: SOVEREIGN_SECRET_KEY (base64 or 64 hex digits) or
SOVEREIGN_SECRET_KEY_FILE, else <data dir>/secret.key, which 'sovereign up'
creates when no key is configured. Every worker needs the same key; list
and delete need none.
`

// secretKeyFile is the key file under the data dir.
const secretKeyFile = "secret.key"

// stdio are the streams of a CLI command.
type stdio struct {
	in       *os.File
	out, err io.Writer
}

// secretCmd runs `sovereign secret`.
func secretCmd(ctx context.Context, args []string, std stdio, getenv func(string) string) error {
	if len(args) == 0 {
		return app.UsageError{Err: errors.New(strings.TrimSpace(secretUsage))}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(std.out, secretUsage)
		return nil
	case "set", "list", "delete", "keygen":
	default:
		return app.UsageError{Err: fmt.Errorf("unknown command %q\n\n%s", "secret "+sub, secretUsage)}
	}
	fs := flag.NewFlagSet("sovereign secret "+sub, flag.ContinueOnError)
	fs.SetOutput(std.err)
	fs.Usage = func() { fmt.Fprint(fs.Output(), secretUsage, "\nFlags of "+sub+":\n"); fs.PrintDefaults() }
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	natsURL := env("NATS_URL", "nats://127.0.0.1:4222")
	dataDir := env("SOVEREIGN_DATA_DIR", "./.sovereign")
	timeout := 10 * time.Second
	if sub != "keygen" {
		fs.StringVar(&natsURL, "nats-url", natsURL, "NATS server URL [NATS_URL]")
		fs.StringVar(&dataDir, "data-dir", dataDir, "where 'sovereign up' keeps its data, and secret.key when no key is configured [SOVEREIGN_DATA_DIR]")
		config.DurationVar(fs, &timeout, "timeout", timeout, "how long to wait for NATS")
	}
	var fromFile, keyFile string
	var asJSON bool
	switch sub {
	case "set":
		fs.StringVar(&fromFile, "from-file", "", "read the value from this file instead of stdin (one trailing newline is dropped)")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print a JSON array")
	case "keygen":
		fs.StringVar(&keyFile, "file", "", "write the key to this new file (mode 0600) instead of stdout")
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return app.UsageError{Err: err}
	}
	want := map[string]int{"set": 1, "delete": 1, "list": 0, "keygen": 0}[sub]
	if len(pos) != want {
		if want == 1 {
			if len(pos) == 2 && sub == "set" {
				return app.UsageError{Err: errors.New("sovereign secret set takes the name only: the value is read from stdin (or --from-file), never from the command line, where shell history and ps would keep it")}
			}
			return app.UsageError{Err: fmt.Errorf("usage: sovereign secret %s NAME", sub)}
		}
		return app.UsageError{Err: fmt.Errorf("sovereign secret %s takes no arguments (got %q)", sub, pos)}
	}

	if sub == "keygen" {
		return secretKeygen(keyFile, std)
	}
	name := ""
	if want == 1 {
		name = pos[0]
		if err := secrets.ValidName(name); err != nil {
			return app.UsageError{Err: err}
		}
	}
	var key *secrets.Key
	var source string
	var value []byte
	defer func() { clear(value) }()
	if sub == "set" {
		// The key and the value first: no NATS connection waits on a
		// prompt.
		key, source, err = secretKey(getenv, dataDir)
		if err != nil {
			return err
		}
		value, err = readSecretValue(ctx, name, fromFile, std)
		if err != nil {
			return err
		}
		if err := secrets.ValidValue(value); err != nil {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	} else if sub == "list" {
		// Optional: to mark secrets set with another key.
		key, _, _ = secretKey(getenv, dataDir)
	}

	nc, err := nats.Connect(natsURL, nats.Name("sovereign-secret"), nats.Timeout(timeout))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w (is sovereign up or NATS running? pass --nats-url)", natsURL, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := secrets.Open(ctx, nc, "", key)
	if err != nil {
		return err
	}
	switch sub {
	case "set":
		return secretSet(ctx, st, name, value, source, std)
	case "delete":
		if err := st.Delete(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "secret %s deleted; workers forget it at once\n", name)
		return nil
	default:
		return secretList(ctx, st, asJSON, std)
	}
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments, and returns those.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// secretKey resolves the key for the CLI: SOVEREIGN_SECRET_KEY or
// SOVEREIGN_SECRET_KEY_FILE, else <dataDir>/secret.key when it exists.
// source says where it came from.
func secretKey(getenv func(string) string, dataDir string) (*secrets.Key, string, error) {
	k, err := secrets.LoadKey(getenv)
	switch {
	case err == nil:
		if getenv(secrets.EnvKey) != "" {
			return k, secrets.EnvKey, nil
		}
		return k, getenv(secrets.EnvKeyFile), nil
	case !errors.Is(err, secrets.ErrNoKey):
		return nil, "", err
	}
	path := filepath.Join(dataDir, secretKeyFile)
	k, err = secrets.LoadKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("no secret key: set %s or %s to the key the workers have, "+
			"or run sovereign up once (it creates %s), or pass --data-dir where it keeps its data", secrets.EnvKey, secrets.EnvKeyFile, path)
	}
	return k, path, err
}

// secretKeyForUp resolves the key for `sovereign up` as the CLI does, and
// creates <dataDir>/secret.key (0600) with a new key when none is
// configured, so that `sovereign up` and `sovereign secret set` on one
// machine share a key without any set-up.
func secretKeyForUp(dataDir string) (*secrets.Key, error) {
	k, err := secrets.LoadKey(os.Getenv)
	if err == nil {
		slog.Info("secret key from the environment", "key_id", k.ID())
		return k, nil
	}
	if !errors.Is(err, secrets.ErrNoKey) {
		return nil, err
	}
	path := filepath.Join(dataDir, secretKeyFile)
	k, created, err := secrets.LoadOrCreateKeyFile(path)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	if created {
		slog.Info("created a secret key for operator secrets: back it up; workers on other machines need it in "+secrets.EnvKeyFile,
			"file", abs, "key_id", k.ID())
	} else {
		slog.Info("secret key", "file", abs, "key_id", k.ID())
	}
	return k, nil
}

// readSecretValue reads the value of name from a file or stdin.
func readSecretValue(ctx context.Context, name, fromFile string, std stdio) ([]byte, error) {
	if fromFile != "" {
		f, err := os.Open(fromFile)
		if err != nil {
			return nil, fmt.Errorf("--from-file: %w", err)
		}
		defer f.Close()
		return secrets.ReadAllValue(f)
	}
	if secrets.IsTerminal(std.in) {
		return secrets.ReadValue(ctx, std.in, std.err, "Value of "+name+" (not shown; Enter to finish): ")
	}
	return secrets.ReadAllValue(std.in)
}

func secretSet(ctx context.Context, st *secrets.Store, name string, value []byte, source string, std stdio) error {
	key := st.Key()
	if infos, err := st.Names(ctx); err == nil {
		others := map[string]int{}
		for _, i := range infos {
			if i.Name != name && i.KeyID != key.ID() {
				others[i.KeyID]++
			}
		}
		for id, n := range others {
			fmt.Fprintf(std.err, "warning: %d other secret(s) were set with key %s, this one with key %s: "+
				"a worker has one key and cannot read both; use the same key everywhere\n", n, id, key.ID())
		}
	}
	if err := st.Set(ctx, name, value); err != nil {
		return err
	}
	if len(value) < secrets.MinScrubLen {
		fmt.Fprintf(std.err, "warning: values shorter than %d bytes are substituted but not scrubbed from what agents see "+
			"(they would cut ordinary words); this one may show in page text\n", secrets.MinScrubLen)
	}
	fmt.Fprintf(std.out, "secret %s set with key %s (from %s); agents write %s, and workers pick it up at once\n",
		name, key.ID(), source, secrets.Placeholder(name))
	return nil
}

func secretList(ctx context.Context, st *secrets.Store, asJSON bool, std stdio) error {
	infos, err := st.Names(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if infos == nil {
			infos = []secrets.Info{}
		}
		enc := json.NewEncoder(std.out)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	if len(infos) == 0 {
		fmt.Fprintln(std.out, "no secrets; set one with: sovereign secret set NAME")
		return nil
	}
	tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tUPDATED\tKEY")
	for _, i := range infos {
		key := i.KeyID
		if k := st.Key(); k != nil && key != k.ID() {
			key += " (not this machine's key " + k.ID() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", i.Name, i.Updated.Local().Format("2006-01-02 15:04:05"), key)
	}
	return tw.Flush()
}

func secretKeygen(file string, std stdio) error {
	if file != "" {
		k, err := secrets.GenerateKeyFile(file)
		if err != nil {
			return err
		}
		fmt.Fprintf(std.out, "wrote a new secret key (id %s) to %s (mode 0600)\n", k.ID(), file)
		fmt.Fprintf(std.err, "# give it to sovereign up, every browser worker and this CLI as %s=%s\n", secrets.EnvKeyFile, file)
		return nil
	}
	text, err := secrets.GenerateKeyText()
	if err != nil {
		return err
	}
	fmt.Fprintln(std.out, text)
	fmt.Fprintf(std.err, "# a new secret key: give it to sovereign up, every browser worker and this CLI as %s,\n"+
		"# or write it to a file only you can read (chmod 600) and set %s to its path.\n"+
		"# Keep a copy: without it the stored secrets cannot be read.\n", secrets.EnvKey, secrets.EnvKeyFile)
	return nil
}
