package signer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
	"gopkg.in/yaml.v3"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// The origin policy: what a page (window.nostr) may ask the session's
// identity to do. Requests that did not come from a page (origin "", the
// agent or gateway itself) are not subject to it.
//
// A policy is a list of rules, first match wins. Operator rules (the policy
// file) come first, then the defaults:
//
//	sign kinds 0,3,5,10002  from any origin  → ask
//	decrypt                 from any origin  → ask
//	any operation           from "top"       → allow
//	any operation           from any origin  → ask
//
// "top" is the origin of the tab's top-level page, the one the session
// navigated to: a frame of another origin (an embedded widget, an ad) asks.

// Action is what a rule decides.
type Action string

// The actions.
const (
	Allow Action = "allow"
	Deny  Action = "deny"
	Ask   Action = "ask"
)

// Op is the operation a request asks for.
type Op string

// The operations. OpAny matches every operation.
const (
	OpGetPublicKey Op = "get_public_key"
	OpSign         Op = "sign"
	OpEncrypt      Op = "encrypt"
	OpDecrypt      Op = "decrypt"
	OpAny          Op = "*"
)

// OriginTop is the origin pattern that matches the tab's top-level origin.
const OriginTop = "top"

// Rule is one line of the policy.
type Rule struct {
	// Origin: "*", "top", an exact origin (https://example.com, with a
	// port when not the default) or a subdomain wildcard
	// (https://*.example.com, which does not match example.com itself).
	Origin string `yaml:"origin"`
	// Op: get_public_key, sign, encrypt, decrypt or "*" (the default).
	Op Op `yaml:"op"`
	// Kinds limits a sign rule to these event kinds; empty is any kind.
	Kinds []int `yaml:"kinds"`
	// Action: allow, deny or ask.
	Action Action `yaml:"action"`
	// builtin marks the default rules (for String).
	builtin bool
}

// String renders r as one line, as login_status shows it.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Action, r.Op)
	if len(r.Kinds) > 0 {
		ks := make([]string, len(r.Kinds))
		for i, k := range r.Kinds {
			ks[i] = strconv.Itoa(k)
		}
		fmt.Fprintf(&b, " kinds %s", strings.Join(ks, ","))
	}
	switch r.Origin {
	case "*":
		b.WriteString(" from any origin")
	case OriginTop:
		b.WriteString(" from the top-level page's origin")
	default:
		fmt.Fprintf(&b, " from %s", r.Origin)
	}
	if r.builtin {
		b.WriteString(" (default)")
	}
	return b.String()
}

// DefaultRules are the rules every policy ends with.
func DefaultRules() []Rule {
	return []Rule{
		{Origin: "*", Op: OpSign, Kinds: []int{0, 3, 5, 10002}, Action: Ask, builtin: true},
		{Origin: "*", Op: OpDecrypt, Action: Ask, builtin: true},
		{Origin: OriginTop, Op: OpAny, Action: Allow, builtin: true},
		{Origin: "*", Op: OpAny, Action: Ask, builtin: true},
	}
}

// Policy is an ordered rule list ending with DefaultRules.
type Policy struct {
	rules []Rule
}

// NewPolicy checks the operator's rules and appends the defaults.
func NewPolicy(rules []Rule) (*Policy, error) {
	var errs []error
	out := make([]Rule, 0, len(rules)+4)
	for i, r := range rules {
		if r.Op == "" {
			r.Op = OpAny
		}
		if err := r.check(); err != nil {
			errs = append(errs, fmt.Errorf("rule %d: %w", i+1, err))
			continue
		}
		r.Origin = strings.ToLower(r.Origin)
		r.builtin = false
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Policy{rules: append(out, DefaultRules()...)}, nil
}

func (r Rule) check() error {
	switch r.Action {
	case Allow, Deny, Ask:
	case "":
		return errors.New("action is required: allow, deny or ask")
	default:
		return fmt.Errorf("action %q: must be allow, deny or ask", r.Action)
	}
	switch r.Op {
	case OpGetPublicKey, OpSign, OpEncrypt, OpDecrypt, OpAny:
	default:
		return fmt.Errorf("op %q: must be get_public_key, sign, encrypt, decrypt or *", r.Op)
	}
	if len(r.Kinds) > 0 && r.Op != OpSign {
		return errors.New("kinds only apply to op: sign")
	}
	for _, k := range r.Kinds {
		if k < 0 || k > 65535 {
			return fmt.Errorf("kind %d: must be 0 to 65535", k)
		}
	}
	return checkOriginPattern(r.Origin)
}

// checkOriginPattern accepts "*", "top", scheme://host[:port] and
// scheme://*.host[:port].
func checkOriginPattern(p string) error {
	switch p {
	case "":
		return errors.New(`origin is required: "*", "top", https://example.com or https://*.example.com`)
	case "*", OriginTop:
		return nil
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("origin %q: must be scheme://host[:port] with nothing after it (like https://example.com), \"*\" or \"top\"", p)
	}
	host := u.Hostname()
	if strings.Contains(strings.TrimPrefix(host, "*."), "*") {
		return fmt.Errorf("origin %q: a wildcard may only be the first label (https://*.example.com)", p)
	}
	return nil
}

// PolicyFile is the YAML the signer's --policy-file holds:
//
//	rules:
//	  - origin: https://snort.social
//	    op: sign
//	    kinds: [1, 7]
//	    action: allow
//	  - origin: https://*.example.net
//	    action: deny
type PolicyFile struct {
	Rules []Rule `yaml:"rules"`
}

// LoadPolicy reads a policy file (strict: unknown keys are errors); "" is
// the defaults alone.
func LoadPolicy(path string) (*Policy, error) {
	if path == "" {
		return NewPolicy(nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signer policy file: %w", err)
	}
	var f PolicyFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("signer policy file %s: %w", path, err)
	}
	p, err := NewPolicy(f.Rules)
	if err != nil {
		return nil, fmt.Errorf("signer policy file %s: %w", path, err)
	}
	return p, nil
}

// Lines renders the policy, one rule per line, first match wins.
func (p *Policy) Lines() []string {
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.String()
	}
	return out
}

// Request is what the policy judges.
type Request struct {
	Origin    string // the calling frame's origin; "" when not from a page
	TopOrigin string // the tab's top-level origin
	Op        Op
	Kind      int // sign only
	// Pubkey is the identity asked (hex): a session grant holds for that
	// identity only, not for the next one switch_identity logs in.
	Pubkey string
}

// Decide returns the action of the first matching rule and that rule.
func (p *Policy) Decide(r Request) (Action, Rule) {
	origin := normalizeOrigin(r.Origin)
	top := normalizeOrigin(r.TopOrigin)
	for _, rule := range p.rules {
		if rule.Op != OpAny && rule.Op != r.Op {
			continue
		}
		if len(rule.Kinds) > 0 && !slices.Contains(rule.Kinds, r.Kind) {
			continue
		}
		if matchOrigin(rule.Origin, origin, top) {
			return rule.Action, rule
		}
	}
	// Unreachable: the defaults end with a catch-all.
	return Ask, Rule{Origin: "*", Op: OpAny, Action: Ask, builtin: true}
}

// normalizeOrigin lower-cases an origin and drops a default port.
func normalizeOrigin(o string) string {
	o = strings.ToLower(strings.TrimSuffix(o, "/"))
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok {
		return o // "null", or not an origin
	}
	host, port := rest, ""
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.HasSuffix(rest, "]") {
		host, port = rest[:i], rest[i+1:]
	}
	// "example.com." is the same host as "example.com".
	host = strings.TrimSuffix(host, ".")
	// Internationalized names compare in their ASCII form, as Chromium
	// reports them (bücher.example → xn--bcher-kva.example).
	if a, err := idna.Lookup.ToASCII(host); err == nil && a != "" {
		host = a
	}
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	if port != "" {
		return scheme + "://" + host + ":" + port
	}
	return scheme + "://" + host
}

func matchOrigin(pattern, origin, top string) bool {
	switch pattern {
	case "*":
		return true
	case OriginTop:
		// An opaque origin ("null": data:, sandboxed frames) is never
		// the top-level origin, even in a tab whose top is opaque too.
		return origin != "" && origin != "null" && origin == top
	}
	if scheme, rest, ok := strings.Cut(pattern, "://*."); ok {
		// A subdomain wildcard: normalize the part after "*.".
		suffix := strings.TrimPrefix(normalizeOrigin(scheme+"://"+rest), scheme+"://")
		oScheme, oHost, ok := strings.Cut(origin, "://")
		return ok && oScheme == scheme && strings.HasSuffix(oHost, "."+suffix)
	}
	return origin == normalizeOrigin(pattern)
}

// AskFunc asks a person whether a page may do what r says; it returns nil
// when approved. It is the hook for approvals of window.nostr requests;
// without one, "ask" is denied with an error saying so.
type AskFunc func(ctx context.Context, scope string, r Request) error

// check applies the policy to a request from a page; origin "" (not from a
// page) is always allowed. It returns nil to allow, or a FORBIDDEN bus
// error naming the origin, what was asked and the rule.
func (s *Service) check(ctx context.Context, scope string, r Request) error {
	if r.Origin == "" {
		return nil
	}
	action, rule := s.policy.Decide(r)
	switch action {
	case Allow:
		policyTotal.WithLabelValues("allow").Inc()
		return nil
	case Deny:
		policyTotal.WithLabelValues("deny").Inc()
		return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s for %s is denied by the signer's policy (rule: %s)", describe(r), r.Origin, rule)
	}
	if s.cfg.Ask != nil {
		if err := s.cfg.Ask(ctx, scope, r); err != nil {
			policyTotal.WithLabelValues("ask_denied").Inc()
			return bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "%s for %s needs approval (rule: %s), and it was not approved: %v", describe(r), r.Origin, rule, err)
		}
		policyTotal.WithLabelValues("ask_approved").Inc()
		return nil
	}
	policyTotal.WithLabelValues("ask_denied").Inc()
	return bus.Errorf(commonv1.ErrorCode_FORBIDDEN,
		"%s for %s needs approval (rule: %s), and this signer has no approval channel: the request is denied (an operator can allow it in the signer's policy file)",
		describe(r), r.Origin, rule)
}

// describe says what r asks, for errors and logs (never a payload).
func describe(r Request) string {
	switch r.Op {
	case OpSign:
		return fmt.Sprintf("signing a kind %d event", r.Kind)
	case OpDecrypt:
		return "decrypting"
	case OpEncrypt:
		return "encrypting"
	case OpGetPublicKey:
		return "reading the public key"
	}
	return string(r.Op)
}
