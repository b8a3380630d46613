package gateway

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/config"
	"github.com/sovereign-fleet/sovereign/services/kit/urlpolicy"
)

// PolicyFile is the operator's global policy file (--policy-file), YAML:
//
//	urls:
//	  allow: ["*.example.com", "intranet.corp:8443"]  # when set, only these (and session grants)
//	  block: ["*.evil.example"]                       # always refused, whatever else allows
//	  block_private: true                              # default: loopback, private and metadata addresses refused
//	approvals:
//	  tools: [eval]                                    # calls that wait for a person's decision
//
// Flags and environment variables add to the file's lists.
type PolicyFile struct {
	URLs struct {
		Allow        []string `yaml:"allow"`
		Block        []string `yaml:"block"`
		BlockPrivate *bool    `yaml:"block_private"`
	} `yaml:"urls"`
	Approvals struct {
		Tools []string `yaml:"tools"`
	} `yaml:"approvals"`
}

// LoadPolicyFile reads and checks a policy file. Unknown keys are errors
// (a typo must not silently disable a rule); errors name the file.
func LoadPolicyFile(path string) (*PolicyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	var p PolicyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, errEOF) {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	var errs []error
	if err := urlpolicy.ValidatePatterns(p.URLs.Allow); err != nil {
		errs = append(errs, fmt.Errorf("urls.allow: %w", err))
	}
	if err := urlpolicy.ValidatePatterns(p.URLs.Block); err != nil {
		errs = append(errs, fmt.Errorf("urls.block: %w", err))
	}
	for _, t := range p.Approvals.Tools {
		if _, ok := catalog.Lookup(t); !ok && !strings.Contains(t, "__") {
			errs = append(errs, fmt.Errorf("approvals.tools: %q is not a tool of the catalog nor a script tool (stem__name)", t))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return &p, nil
}

// errEOF is what yaml.v3 returns for an empty document.
var errEOF = func() error {
	var v struct{}
	return yaml.NewDecoder(bytes.NewReader(nil)).Decode(&v)
}()

// registerPolicyFlags adds the URL policy flags to fs.
func registerPolicyFlags(fs *flag.FlagSet, errs *[]error, cfg *Config) {
	fs.StringVar(&cfg.PolicyFile, "policy-file", config.Env("SOVEREIGN_POLICY_FILE", ""),
		"YAML file with the global URL rules and monitored tools (see docs/security.md) [SOVEREIGN_POLICY_FILE]")
	cfg.URLAllow = splitList(config.Env("SOVEREIGN_URL_ALLOW", ""))
	cfg.URLBlock = splitList(config.Env("SOVEREIGN_URL_BLOCK", ""))
	fs.Func("url-allow", "comma-separated URL patterns pages may load (example.com, *.example.com, https://host:port, 10.0.0.0/8, *); "+
		"when any allow rule exists, everything else is refused [SOVEREIGN_URL_ALLOW]", func(v string) error {
		cfg.URLAllow = append(cfg.URLAllow, splitList(v)...)
		return nil
	})
	fs.Func("url-block", "comma-separated URL patterns pages may never load, whatever allows them [SOVEREIGN_URL_BLOCK]", func(v string) error {
		cfg.URLBlock = append(cfg.URLBlock, splitList(v)...)
		return nil
	})
	fs.BoolVar(&cfg.AllowPrivate, "allow-private", config.MustBool(errs, "SOVEREIGN_ALLOW_PRIVATE", false),
		"let pages reach loopback, private-network and cloud metadata addresses; by default only hosts an allow rule names explicitly are reachable there [SOVEREIGN_ALLOW_PRIVATE]")
}

// validatePolicy checks the URL rules of cfg (the file is checked when it
// is loaded).
func (c Config) validatePolicy(bad func(flag, format string, a ...any)) {
	if err := urlpolicy.ValidatePatterns(c.URLAllow); err != nil {
		bad("url-allow", "%v", err)
	}
	if err := urlpolicy.ValidatePatterns(c.URLBlock); err != nil {
		bad("url-block", "%v", err)
	}
}

// globalPolicy is the policy in force for every caller: the file's rules
// plus the flags'.
type globalPolicy struct {
	urls         *browserv1.UrlRules
	blockPrivate bool
	approve      []string // monitored tools
}

func loadGlobalPolicy(cfg Config) (*globalPolicy, error) {
	p := &globalPolicy{
		urls: &browserv1.UrlRules{Tier: "global",
			Allow: slices.Clone(cfg.URLAllow), Block: slices.Clone(cfg.URLBlock)},
		blockPrivate: !cfg.AllowPrivate,
	}
	if cfg.PolicyFile == "" {
		return p, nil
	}
	f, err := LoadPolicyFile(cfg.PolicyFile)
	if err != nil {
		return nil, err
	}
	p.urls.Allow = append(p.urls.Allow, f.URLs.Allow...)
	p.urls.Block = append(p.urls.Block, f.URLs.Block...)
	if f.URLs.BlockPrivate != nil && !*f.URLs.BlockPrivate {
		p.blockPrivate = false
	}
	p.approve = f.Approvals.Tools
	return p, nil
}

// forCaller is the URL policy of a caller's call: the global tier, the
// caller's token tier and the session's grants.
func (gp *globalPolicy) forCaller(c Caller, sessionGrants []string) *browserv1.UrlPolicy {
	p := &browserv1.UrlPolicy{Enforced: true, BlockPrivate: gp.blockPrivate}
	if len(gp.urls.Allow) > 0 || len(gp.urls.Block) > 0 {
		p.Tiers = append(p.Tiers, gp.urls)
	}
	if len(c.URLAllow) > 0 || len(c.URLBlock) > 0 {
		p.Tiers = append(p.Tiers, &browserv1.UrlRules{Tier: "token", Allow: c.URLAllow, Block: c.URLBlock})
	}
	if len(sessionGrants) > 0 {
		p.Tiers = append(p.Tiers, &browserv1.UrlRules{Tier: "session", Allow: sessionGrants})
	}
	// Nothing to enforce (no rules, private addresses allowed): the worker
	// then intercepts nothing, at no cost per request.
	p.Enforced = len(p.Tiers) > 0 || p.BlockPrivate
	return p
}

// URLPolicy is the URL policy of a caller's call without session grants
// (a custom HTTP tool's: extend.URLPolicy).
func (gp *globalPolicy) URLPolicy(c Caller) *browserv1.UrlPolicy { return gp.forCaller(c, nil) }

// hasAllowRules reports whether a caller's policy has allow rules: only
// then can a session grant change anything.
func (gp *globalPolicy) hasAllowRules(c Caller) bool {
	return len(gp.urls.Allow) > 0 || len(c.URLAllow) > 0
}

// sessionGrants are the URL patterns people granted to the call's browser
// session, plus the host a person let this very call navigate to. Without
// allow rules no grant matters, and none is read.
func (g *Gateway) sessionGrants(ctx context.Context, c *dispatch.Call) []string {
	if !g.policy.hasAllowRules(c.Caller) {
		return nil
	}
	grants, err := g.approvals.URLGrants(ctx, c)
	if err != nil {
		g.log.WarnContext(ctx, "read the session's URL grants; the call goes without them", "err", err)
	}
	if c.URLOnce != "" && !slices.Contains(grants, c.URLOnce) {
		grants = append(grants, c.URLOnce)
	}
	return grants
}

// NeedsGrant reports whether a call of tool navigates to a URL that the
// policy refuses only because no allow list names its host: a person may
// then let the session go there (approve once: this call; approve for the
// session: a session grant of the host). pattern is the host to grant.
// The approval gate asks it (approve.URLPolicy).
func (gp *globalPolicy) NeedsGrant(c *dispatch.Call, sessionGrants func() []string) (reason, pattern string, ok bool) {
	if c.Tool != "open" && c.Tool != "tab_new" || !gp.hasAllowRules(c.Caller) {
		return "", "", false
	}
	raw, _ := c.Args["url"].(string)
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" || !urlpolicy.IsNetworkScheme(u.Scheme) {
		return "", "", false // the worker refuses or lets it through itself
	}
	pol, err := urlpolicy.Compile(gp.forCaller(c.Caller, sessionGrants()))
	if err != nil {
		return "", "", false
	}
	d := pol.Check(u, nil)
	if d.Allowed || !d.Grantable {
		return "", "", false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if r, err := urlpolicy.ParsePattern(host); err != nil || !r.Exact() {
		// "http://*/" parses as a URL; its grant would lift every allow
		// list. Only one exact host can be granted.
		return "", "", false
	}
	return fmt.Sprintf("%s is %s; approving lets this browser session load %s", u.Redacted(), d.Rule, host), host, true
}
