package signer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/app"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

// Version of the service, reported to `nats micro info`.
const Version = "0.1.0"

// DefaultIdentityIdle is how long an identity may go unused before the
// signer wipes it: longer than any sensible worker --idle-timeout.
const DefaultIdentityIdle = 24 * time.Hour

// DefaultLoginTimeout bounds an nsigner login (connect, hello and
// get_public_key) when the request's own deadline is longer.
const DefaultLoginTimeout = 15 * time.Second

// Config configures the signer service.
type Config struct {
	// LoginTimeout bounds an nsigner login; default DefaultLoginTimeout.
	LoginTimeout time.Duration
	// NsignerSlowTimeout bounds an nsigner sign_event or decrypt, which a
	// person may approve on the device; default nsigner.DefaultSlowTimeout
	// (lower it only in tests).
	NsignerSlowTimeout time.Duration
	// Listen serves /healthz, /readyz and /metrics; "" for none.
	Listen string
	// Logger receives the service's records (never a secret); default
	// slog.Default().
	Logger *slog.Logger
	// Policy is the origin policy for requests from pages; default
	// PolicyFile's rules, else the built-in rules alone (DefaultRules).
	Policy *Policy
	// PolicyFile is a YAML policy file (see PolicyFile), read by New
	// when Policy is nil.
	PolicyFile string
	// Ask, when set, asks a person about requests the policy says "ask"
	// for. Without it New uses the fleet's approval queue (the operator
	// console decides) when the bus has JetStream; failing that, "ask" is
	// denied with an error saying so.
	Ask AskFunc
	// ApprovalTimeout bounds the wait for a console decision; default
	// DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// DataDir is where remembered identities live (<DataDir>/identities);
	// "" disables remember.
	DataDir string
	// Passphrase encrypts remembered identities (NIP-49); "" refuses
	// remember. SECRET.
	Passphrase string
	// IdentityIdle wipes an identity no request has used for this long
	// (default DefaultIdentityIdle). Workers log a session out when they
	// close it; this catches the sessions of a worker that died.
	IdentityIdle time.Duration
	// RememberLogN is NIP-49's scrypt cost for new files (default 16:
	// 64 MiB and a fraction of a second; lower only in tests).
	RememberLogN uint8
}

func (c Config) withDefaults() Config {
	if c.LoginTimeout <= 0 {
		c.LoginTimeout = DefaultLoginTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = DefaultApprovalTimeout
	}
	if c.IdentityIdle <= 0 {
		c.IdentityIdle = DefaultIdentityIdle
	}
	if c.RememberLogN == 0 {
		c.RememberLogN = 16
	}
	return c
}

// Service is the signer: a table of identities keyed by browser-session
// scope, served on the bus. It runs as ONE replica: the identities live in
// this process's memory only.
type Service struct {
	cfg    Config
	bus    *bus.Conn
	svc    micro.Service
	log    *slog.Logger
	policy *Policy
	audit  *audit.Publisher // nil without JetStream

	life app.Lifetime // Run until Close

	mu     sync.Mutex
	ids    map[string]*identity // by scope
	closed bool
}

// New registers the signer's bus endpoints (sov.signer.*) on c; ctx bounds
// the set-up. Call Run, and Close when done.
func New(ctx context.Context, cfg Config, c *bus.Conn) (*Service, error) {
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, bus: c, ids: map[string]*identity{}, policy: cfg.Policy,
		log: cfg.Logger.With("component", "signer")}
	if s.policy == nil {
		p, err := LoadPolicy(cfg.PolicyFile)
		if err != nil {
			return nil, app.UsageError{Err: err}
		}
		s.policy = p
	}
	if s.cfg.Ask == nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		q, err := approval.Open(qctx, c.NATS(), c.Prefix())
		cancel()
		if err != nil {
			s.log.Warn("no approval queue: window.nostr requests the policy says ask for are denied", "err", err)
		} else {
			s.cfg.Ask = s.consoleAsk(q, cfg.ApprovalTimeout)
		}
	}
	s.openAudit()
	if err := s.register(); err != nil {
		if s.audit != nil {
			_ = s.audit.Close(context.Background())
		}
		return nil, err
	}
	// The subscriptions reach the server before New returns: a request
	// made right after is answered.
	if err := c.NATS().Flush(); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("signer: register endpoints: %w", err)
	}
	s.log.Info("signer ready (one replica: identities live in this process's memory)")
	return s, nil
}

// Run serves health (cfg.Listen) and wipes idle identities until ctx ends
// or Close is called; the endpoints answer from New on. It returns nil when
// ctx ends.
func (s *Service) Run(ctx context.Context) error {
	return s.life.Run(ctx, func(ctx context.Context) error {
		if s.cfg.Listen != "" {
			if err := s.serveHealth(ctx); err != nil {
				return err
			}
		}
		tick := time.NewTicker(min(s.cfg.IdentityIdle/4, time.Minute))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case now := <-tick.C:
				s.expireIdle(now)
			}
		}
	})
}

// Close stops Run, stops the bus endpoints, lets running requests finish
// (up to 5 s, within ctx), then wipes every identity's keys and closes
// every nsigner link.
func (s *Service) Close(ctx context.Context) error {
	var err error
	if s.svc != nil {
		err = s.svc.Stop()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = errors.Join(err, s.life.Stop(ctx))
	// The unsubscriptions reach the server before Close returns: no
	// request is taken afterwards.
	_ = s.bus.NATS().FlushWithContext(ctx)
	_ = s.bus.Wait(ctx)
	s.mu.Lock()
	s.closed = true
	ids := s.ids
	s.ids = map[string]*identity{}
	identitiesGauge.Set(0)
	s.mu.Unlock()
	for _, id := range ids {
		id.wipe()
	}
	if s.audit != nil {
		_ = s.audit.Close(ctx)
	}
	return err
}

// identity is one scope's logged-in identity. Exactly one of key (local,
// seed), remote (nsigner, nip46) is set, or neither (readonly).
type identity struct {
	method signerv1.Method
	pubkey string // hex
	npub   string

	// mu guards key: operations hold it for reading while they use the
	// key, wipe holds it for writing, so a key is never wiped mid-use.
	mu    sync.RWMutex
	key   *nostr.SecretKey
	wiped bool

	remote remote // nsigner or nip46; safe for concurrent use, close fails calls in flight

	lastUsed time.Time // guarded by Service.mu
}

// errLoggedOut is what an operation on an identity wiped meanwhile returns.
var errLoggedOut = bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "the identity was logged out while the request ran; log in again")

// withKey runs fn with the identity's secret key, unless it was wiped.
func (id *identity) withKey(fn func(k *nostr.SecretKey) error) error {
	id.mu.RLock()
	defer id.mu.RUnlock()
	if id.wiped {
		return errLoggedOut
	}
	return fn(id.key)
}

// wipe zeroes the key and closes the link.
func (id *identity) wipe() {
	id.mu.Lock()
	id.wiped = true
	if id.key != nil {
		id.key.Wipe()
	}
	id.mu.Unlock()
	if id.remote != nil {
		id.remote.close()
	}
}

// lookup returns scope's identity.
func (s *Service) lookup(scope string) (*identity, error) {
	if scope == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "scope is required (the browser session's scope key)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.ids[scope]
	if id == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "not logged in: this browser session has no Nostr identity; call login first")
	}
	id.lastUsed = time.Now()
	return id, nil
}

// expireIdle wipes identities no request has used for cfg.IdentityIdle:
// those of browser sessions whose worker died without logging them out.
func (s *Service) expireIdle(now time.Time) int {
	s.mu.Lock()
	var gone []*identity
	for scope, id := range s.ids {
		if now.Sub(id.lastUsed) > s.cfg.IdentityIdle {
			gone = append(gone, id)
			delete(s.ids, scope)
			s.log.Info("identity expired: unused", "scope", scopeDigest(scope), "idle_for", s.cfg.IdentityIdle.String())
		}
	}
	identitiesGauge.Set(float64(len(s.ids)))
	s.mu.Unlock()
	for _, id := range gone {
		id.wipe()
	}
	return len(gone)
}

// install makes id scope's identity and wipes the one it replaces. It
// fails, wiping id, once the service is closed.
func (s *Service) install(scope string, id *identity) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		id.wipe()
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "the signer is shutting down; try again")
	}
	old := s.ids[scope]
	id.lastUsed = time.Now()
	s.ids[scope] = id
	identitiesGauge.Set(float64(len(s.ids)))
	s.mu.Unlock()
	if old != nil {
		old.wipe()
	}
	return nil
}

// remove takes scope's identity out of the table and wipes it.
func (s *Service) remove(scope string) bool {
	s.mu.Lock()
	old := s.ids[scope]
	delete(s.ids, scope)
	identitiesGauge.Set(float64(len(s.ids)))
	s.mu.Unlock()
	if old != nil {
		old.wipe()
	}
	return old != nil
}

// scopeDigest is what log records carry instead of a scope key.
func scopeDigest(scope string) string {
	h := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(h[:6])
}

// newIdentity builds, and for nsigner connects, the identity a Login asks
// for. It does not touch the table; on error nothing is left open.
func (s *Service) newIdentity(ctx context.Context, r *signerv1.Login) (*identity, error) {
	invalid := func(err error) error {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "login (%s): %v", methodName(r.GetMethod()), err)
	}
	id := &identity{method: r.GetMethod()}
	if r.GetRemember() {
		if err := s.canRemember(r.GetMethod()); err != nil {
			return nil, err
		}
	}
	switch r.GetMethod() {
	case signerv1.Method_METHOD_LOCAL:
		if r.GetNsecOrHex() == "" && r.GetPubkey() != "" {
			k, err := s.loadRemembered(r.GetOwner(), r.GetPubkey())
			if err != nil {
				return nil, err
			}
			id.key = k
			break
		}
		if r.GetNsecOrHex() == "" {
			return nil, invalid(errors.New("nsec_or_hex is required: an nsec1… string or 64 hex characters (or only pubkey, to load a remembered identity)"))
		}
		k, err := nostr.ParseSecretKey(r.GetNsecOrHex())
		if err != nil {
			return nil, invalid(err)
		}
		id.key = k
	case signerv1.Method_METHOD_SEED:
		if r.GetMnemonic() == "" {
			return nil, invalid(errors.New("mnemonic is required: 12 or 24 BIP-39 English words"))
		}
		k, err := nostr.KeyFromMnemonic(r.GetMnemonic(), r.GetPassphrase(), r.GetAccount())
		if err != nil {
			return nil, invalid(err)
		}
		id.key = k
	case signerv1.Method_METHOD_READONLY:
		if r.GetPubkey() == "" {
			return nil, invalid(errors.New("pubkey is required: an npub1… string or 64 hex characters"))
		}
		pk, err := nostr.ParsePublicKey(r.GetPubkey())
		if err != nil {
			return nil, invalid(err)
		}
		id.pubkey = pk
	case signerv1.Method_METHOD_NSIGNER:
		t := r.GetNsigner()
		if t == nil {
			return nil, invalid(errors.New("nsigner is required: transport (serial, unix, tcp or qrexec), device, service, index"))
		}
		dctx, cancel := context.WithTimeout(ctx, s.cfg.LoginTimeout)
		defer cancel()
		c, err := nsigner.Dial(dctx, nsigner.Config{Transport: t.GetTransport(), Device: t.GetDevice(),
			Service: t.GetService(), Index: t.GetIndex(), SlowTimeout: s.cfg.NsignerSlowTimeout, Logger: s.log})
		if err != nil {
			if errors.Is(err, nsigner.ErrLinkDown) || errors.Is(err, context.DeadlineExceeded) {
				return nil, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "login (nsigner): the device is unreachable: %v", err)
			}
			return nil, invalid(err)
		}
		pk, err := c.GetPublicKey(dctx, t.GetIndex())
		if err != nil {
			_ = c.Close()
			return nil, nsignerError("login (nsigner): get_public_key", err)
		}
		id.remote, id.pubkey = nsignerRemote{c: c, index: t.GetIndex()}, pk
	case signerv1.Method_METHOD_NIP46:
		if r.GetBunkerUrl() == "" {
			return nil, invalid(errors.New("bunker_url is required: bunker://<remote-signer-pubkey>?relay=wss://…&secret=…"))
		}
		c, err := s.dialBunker(ctx, r)
		if err != nil {
			return nil, err
		}
		id.remote, id.pubkey = bunkerRemote{c: c}, c.PublicKey()
	default:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "login: method is required: local, seed, readonly, nip46 or nsigner")
	}
	if id.key != nil {
		id.pubkey = id.key.PublicKey()
	}
	npub, err := nostr.EncodeNpub(id.pubkey)
	if err != nil {
		id.wipe()
		return nil, fmt.Errorf("login: encode npub: %w", err)
	}
	id.npub = npub
	if r.GetRemember() {
		if err := s.remember(r.GetOwner(), id); err != nil {
			id.wipe()
			return nil, err
		}
	}
	return id, nil
}

// methodName is the lower-case name of m, as logs and errors say it.
func methodName(m signerv1.Method) string {
	switch m {
	case signerv1.Method_METHOD_LOCAL:
		return "local"
	case signerv1.Method_METHOD_SEED:
		return "seed"
	case signerv1.Method_METHOD_READONLY:
		return "readonly"
	case signerv1.Method_METHOD_NSIGNER:
		return "nsigner"
	case signerv1.Method_METHOD_NIP46:
		return "nip46"
	}
	return "unspecified"
}
