package sovereign

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sovereign-fleet/sovereign/services/gateway"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

const tokenUsage = `sovereign token — API tokens that MCP clients send to the gateway

Usage:
  sovereign token create --name NAME [--allow PATTERN]... [--block PATTERN]... [--approve TOOL]... [--max-sessions N]
                                       create a token; it is printed once, never again
  sovereign token list [--json]        every token: name, id, created, last used, state
  sovereign token revoke NAME|ID       revoke a token; every gateway refuses it from its next request

Clients send "Authorization: Bearer <token>". A gateway listening beyond
loopback requires a token on every request (and refuses to start while
none exists); on loopback a request without one is anonymous. Tokens live
in the NATS KV bucket sov_tokens (--nats-url; 'sovereign up' serves NATS
on 127.0.0.1:4222). A token's --allow/--block URL patterns and --approve
tools add to the gateway's own policy for calls made with it.
`

// tokenCmd runs `sovereign token`, writing to out.
func tokenCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return app.UsageError{Err: errors.New(strings.TrimSpace(tokenUsage))}
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(out, tokenUsage)
		return nil
	case "create", "list", "revoke":
	default:
		return app.UsageError{Err: fmt.Errorf("unknown command %q\n\n%s", "token "+sub, tokenUsage)}
	}
	fs := flag.NewFlagSet("sovereign token "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), tokenUsage, "\nFlags of "+sub+":\n"); fs.PrintDefaults() }
	natsURL := fs.String("nats-url", config.Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL [NATS_URL]")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for NATS")
	var spec tokens.Spec
	var mcpURL string
	var asJSON bool
	switch sub {
	case "create":
		fs.StringVar(&spec.Name, "name", "", "the token's name (required): lower-case letters, digits, '.', '_', '-', like ci-agent")
		fs.Func("allow", "a URL pattern calls with this token may open (repeatable)", appendTo(&spec.URLAllow))
		fs.Func("block", "a URL pattern calls with this token may not open (repeatable)", appendTo(&spec.URLBlock))
		fs.Func("approve", "a tool whose calls with this token wait for a person's approval (repeatable), like eval", appendTo(&spec.Approve))
		fs.IntVar(&spec.MaxSessions, "max-sessions", 0, "browser sessions callers with this token may hold at once (0: the gateway's --sessions-per-caller)")
		fs.StringVar(&spec.CreatedBy, "created-by", defaultCreator(), "who creates the token, for the list")
		def := "http://HOST:8080/mcp"
		if u := config.Env("SOVEREIGN_PUBLIC_URL", ""); u != "" {
			def = strings.TrimSuffix(u, "/") + "/mcp"
		}
		fs.StringVar(&mcpURL, "url", def, "the gateway's MCP URL, for the printed client command [SOVEREIGN_PUBLIC_URL + /mcp]")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print a JSON array")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return app.UsageError{Err: err}
	}
	switch {
	case sub == "revoke" && len(pos) != 1:
		return app.UsageError{Err: fmt.Errorf("sovereign token revoke takes one token name or id (got %d arguments)", len(pos))}
	case sub != "revoke" && len(pos) > 0:
		return app.UsageError{Err: fmt.Errorf("sovereign token %s takes no arguments (got %q); see -h", sub, pos)}
	case sub == "create":
		if spec.Name == "" {
			return app.UsageError{Err: errors.New("sovereign token create needs --name, like --name ci-agent")}
		}
		if err := checkTools(spec.Approve); err != nil {
			return app.UsageError{Err: err}
		}
		if err := spec.Validate(); err != nil {
			return app.UsageError{Err: err}
		}
	}

	nc, err := nats.Connect(*natsURL, nats.Name("sovereign-token"), nats.Timeout(*timeout))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w (is sovereign up or NATS running? pass --nats-url)", *natsURL, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	store, err := tokens.Open(ctx, nc, "")
	if err != nil {
		return err
	}
	defer store.Close()

	switch sub {
	case "create":
		plain, t, err := store.Create(ctx, spec)
		if err != nil {
			return err
		}
		printCreated(out, plain, t, mcpURL)
	case "list":
		list, err := store.List(ctx)
		if err != nil {
			return err
		}
		return printTokens(out, list, asJSON)
	case "revoke":
		t, err := store.Revoke(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Revoked token %q (id %s). Gateways refuse it from their next request on; its name is free again.\n", t.Name, t.ID)
	}
	return nil
}

// appendTo is a flag.Func that collects a repeatable flag.
func appendTo(list *[]string) func(string) error {
	return func(v string) error {
		*list = append(*list, v)
		return nil
	}
}

// checkTools refuses --approve names that are not browser tools.
func checkTools(names []string) error {
	known := gateway.ToolNames()
	for _, n := range names {
		if !slices.Contains(known, n) && !strings.Contains(n, "__") { // script tools are stem__name
			return fmt.Errorf("--approve %q: no such tool; the tools are %s", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// defaultCreator names the user running the command: user@host.
func defaultCreator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		if name == "" {
			return host
		}
		return name + "@" + host
	}
	return name
}

func printCreated(out io.Writer, plain string, t tokens.Token, mcpURL string) {
	fmt.Fprintf(out, "Created API token %q (id %s):\n\n    %s\n\n", t.Name, t.ID, plain)
	fmt.Fprintln(out, "This is the only time the token is shown: it is not stored anywhere, only its digest. Keep it in a secret store now;")
	fmt.Fprintf(out, "if it is lost, revoke it (sovereign token revoke %s) and create another.\n\n", t.Name)
	fmt.Fprintln(out, "Use it from an MCP client, e.g. Claude Code:")
	fmt.Fprintf(out, "\n    claude mcp add --transport http sovereign %s --header \"Authorization: Bearer %s\"\n", mcpURL, plain)
	if strings.Contains(mcpURL, "HOST") {
		fmt.Fprintln(out, "\n(replace HOST with the gateway's address, or pass --url)")
	}
	var policy []string
	if len(t.URLAllow) > 0 {
		policy = append(policy, "allows "+strings.Join(t.URLAllow, ", "))
	}
	if len(t.URLBlock) > 0 {
		policy = append(policy, "blocks "+strings.Join(t.URLBlock, ", "))
	}
	if len(t.Approve) > 0 {
		policy = append(policy, "needs approval for "+strings.Join(t.Approve, ", "))
	}
	if t.MaxSessions > 0 {
		policy = append(policy, fmt.Sprintf("holds at most %d browser sessions", t.MaxSessions))
	}
	if len(policy) > 0 {
		fmt.Fprintf(out, "\nThis token %s.\n", strings.Join(policy, "; "))
	}
}

func printTokens(out io.Writer, list []tokens.Token, asJSON bool) error {
	if asJSON {
		if list == nil {
			list = []tokens.Token{}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(out, "No API tokens. Create one with: sovereign token create --name <name>")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tCREATED\tLAST USED\tSTATE")
	for _, t := range list {
		last := "never"
		if t.LastUsed != nil {
			last = when(*t.LastUsed)
		}
		state := tokens.StateActive
		if t.Revoked() {
			state = "revoked " + when(*t.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.ID, when(t.Created), last, state)
	}
	return tw.Flush()
}

func when(t time.Time) string { return t.Local().Format("2006-01-02 15:04") }
