package signer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/signerbus"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Subjects of the signer endpoints, under the bus prefix.
const (
	SubjectLogin        = "signer.login"
	SubjectLogout       = "signer.logout"
	SubjectStatus       = "signer.status"
	SubjectGetPublicKey = "signer.get_public_key"
	SubjectSignEvent    = "signer.sign_event"
	SubjectEncrypt      = "signer.encrypt"
	SubjectDecrypt      = "signer.decrypt"
)

// register adds the micro service "sovereign-signer" with its endpoints
// (default queue group; but see Service: run one replica).
func (s *Service) register() error {
	svc, err := s.bus.AddService("sovereign-signer", Version, "Sovereign signer: Nostr identities per browser session (one replica)", nil)
	if err != nil {
		return fmt.Errorf("signer service: %w", err)
	}
	s.svc = svc
	c := s.bus
	g := svc.AddGroup(signerbus.Group(c))
	for _, e := range []struct {
		name string
		h    micro.Handler
	}{
		{signerbus.Login.Name, bus.Handle(c, counted(signerbus.Login.Name, s.login))},
		{signerbus.Logout.Name, bus.Handle(c, counted(signerbus.Logout.Name, s.logout))},
		{signerbus.Status.Name, bus.Handle(c, counted(signerbus.Status.Name, s.status))},
		{signerbus.Move.Name, bus.Handle(c, counted(signerbus.Move.Name, s.move))},
		{signerbus.GetPublicKey.Name, bus.Handle(c, counted(signerbus.GetPublicKey.Name, s.getPublicKey))},
		{signerbus.SignEvent.Name, bus.Handle(c, counted(signerbus.SignEvent.Name, s.signEvent))},
		{signerbus.Encrypt.Name, bus.Handle(c, counted(signerbus.Encrypt.Name, s.encrypt))},
		{signerbus.Decrypt.Name, bus.Handle(c, counted(signerbus.Decrypt.Name, s.decrypt))},
	} {
		if err := g.AddEndpoint(e.name, e.h); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("signer endpoint %s: %w", e.name, err)
		}
	}
	return c.Served() // a request made once this returns is answered
}

// login never logs r: it carries secrets. Only the method and the scope's
// digest are logged.
func (s *Service) login(ctx context.Context, r *signerv1.Login) (*signerv1.LoginResponse, error) {
	if r.GetScope() == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "scope is required (the browser session's scope key)")
	}
	log := s.log.With("method", methodName(r.GetMethod()), "scope", scopeDigest(r.GetScope()))
	id, err := s.newIdentity(ctx, r)
	if err != nil {
		log.Info("login failed", "code", bus.CodeOf(err).String())
		return nil, err
	}
	// The caller gave up (it then logs the scope out): a login that
	// finishes afterwards must not come back behind it.
	if err := ctx.Err(); err != nil {
		id.wipe()
		log.Info("login abandoned by the caller", "err", err)
		return nil, bus.Errorf(commonv1.ErrorCode_TIMEOUT, "login: the caller gave up before it finished")
	}
	if err := s.install(r.GetScope(), id); err != nil {
		return nil, err
	}
	log.Info("logged in", "pubkey", id.pubkey)
	return &signerv1.LoginResponse{Pubkey: id.pubkey, Npub: id.npub, Method: id.method}, nil
}

func (s *Service) logout(_ context.Context, r *signerv1.Logout) (*signerv1.LogoutResponse, error) {
	if r.GetScope() == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "scope is required (the browser session's scope key)")
	}
	was := s.remove(r.GetScope())
	if was {
		s.log.Info("logged out", "scope", scopeDigest(r.GetScope()))
	}
	return &signerv1.LogoutResponse{WasLoggedIn: was}, nil
}

// move hands from_scope's identity to to_scope: the gateway restored the
// browser session from_scope was on as to_scope, on another worker.
func (s *Service) move(_ context.Context, r *signerv1.Move) (*signerv1.MoveResponse, error) {
	from, to := r.GetFromScope(), r.GetToScope()
	if from == "" || to == "" || from == to {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "from_scope and to_scope are required and must differ")
	}
	s.mu.Lock()
	id, old := s.ids[from], s.ids[to]
	if id != nil {
		delete(s.ids, from)
		s.ids[to] = id
	}
	s.mu.Unlock()
	if id == nil {
		return &signerv1.MoveResponse{}, nil
	}
	if old != nil {
		old.wipe()
	}
	s.log.Info("identity moved to a restored session", "from", scopeDigest(from), "to", scopeDigest(to))
	return &signerv1.MoveResponse{Moved: true}, nil
}

func (s *Service) status(_ context.Context, r *signerv1.Status) (*signerv1.StatusResponse, error) {
	id, err := s.lookup(r.GetScope())
	if bus.Is(err, commonv1.ErrorCode_NOT_FOUND) {
		return &signerv1.StatusResponse{State: signerv1.LoginState_LOGIN_STATE_LOGGED_OUT,
			Remembered: s.rememberedList(r.GetOwner()), Policy: s.policy.Lines()}, nil
	}
	if err != nil {
		return nil, err
	}
	resp := &signerv1.StatusResponse{State: signerv1.LoginState_LOGIN_STATE_LOGGED_IN, Method: id.method, Pubkey: id.pubkey, Npub: id.npub,
		Remembered: s.rememberedList(r.GetOwner()), Policy: s.policy.Lines()}
	if id.remote != nil {
		resp.LinkState, resp.LinkError, resp.PendingAuthUrl = id.remote.link()
	}
	return resp, nil
}

func (s *Service) getPublicKey(ctx context.Context, r *signerv1.GetPublicKey) (resp *signerv1.GetPublicKeyResponse, err error) {
	defer func(start time.Time) {
		s.auditPage(ctx, start, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpGetPublicKey}, "public key "+resp.GetNpub(), err)
	}(time.Now())
	id, err := s.lookup(r.GetScope())
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpGetPublicKey, Pubkey: id.pubkey}); err != nil {
		return nil, err
	}
	return &signerv1.GetPublicKeyResponse{Pubkey: id.pubkey, Npub: id.npub}, nil
}

// errReadOnly is what signing or decrypting with a readonly identity gets.
var errReadOnly = bus.Errorf(commonv1.ErrorCode_FORBIDDEN, "read-only identity: it can only give its public key (log in with local, seed or nsigner to sign)")

func (s *Service) signEvent(ctx context.Context, r *signerv1.SignEvent) (resp *signerv1.SignEventResponse, err error) {
	defer func(start time.Time) {
		req := Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpSign, Kind: int(r.GetEvent().GetKind())}
		s.auditPage(ctx, start, r.GetScope(), req, signedResult(resp.GetId(), resp.GetKind()), err)
	}(time.Now())
	id, err := s.lookup(r.GetScope())
	if err != nil {
		return nil, err
	}
	in := r.GetEvent()
	if in == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "event is required")
	}
	if in.GetKind() < 0 || in.GetKind() > 65535 {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "event kind %d: must be 0 to 65535", in.GetKind())
	}
	if err := s.check(ctx, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpSign, Kind: int(in.GetKind()), Pubkey: id.pubkey}); err != nil {
		return nil, err
	}
	if id.method == signerv1.Method_METHOD_READONLY {
		return nil, errReadOnly
	}
	ev := &nostr.Event{Kind: int(in.GetKind()), CreatedAt: in.GetCreatedAt(), Content: in.GetContent(), Tags: make([][]string, 0, len(in.GetTags()))}
	if ev.CreatedAt == 0 {
		ev.CreatedAt = time.Now().Unix()
	}
	for _, t := range in.GetTags() {
		ev.Tags = append(ev.Tags, append([]string{}, t.GetValues()...))
	}
	if id.remote != nil {
		signed, err := id.remote.sign(ctx, ev)
		if err != nil {
			return nil, err
		}
		ev = signed
	} else if err := id.withKey(func(k *nostr.SecretKey) error { return nostr.SignEvent(k, ev) }); err != nil {
		return nil, err
	}
	out := &signerv1.SignEventResponse{Id: ev.ID, Pubkey: ev.PubKey, CreatedAt: ev.CreatedAt, Kind: int64(ev.Kind), Content: ev.Content, Sig: ev.Sig}
	for _, t := range ev.Tags {
		out.Tags = append(out.Tags, &signerv1.Tag{Values: t})
	}
	return out, nil
}

func (s *Service) encrypt(ctx context.Context, r *signerv1.Encrypt) (resp *signerv1.EncryptResponse, err error) {
	defer func(start time.Time) {
		s.auditPage(ctx, start, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpEncrypt},
			fmt.Sprintf("encrypted %d characters (%s)", len(r.GetText()), schemeName(r.GetScheme())), err)
	}(time.Now())
	text, err := s.crypt(ctx, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpEncrypt}, r.GetScheme(), r.GetPeerPubkey(), r.GetText())
	if err != nil {
		return nil, err
	}
	return &signerv1.EncryptResponse{Text: text}, nil
}

func (s *Service) decrypt(ctx context.Context, r *signerv1.Decrypt) (resp *signerv1.DecryptResponse, err error) {
	defer func(start time.Time) {
		s.auditPage(ctx, start, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpDecrypt},
			fmt.Sprintf("decrypted a message from %s (%s)", r.GetPeerPubkey(), schemeName(r.GetScheme())), err)
	}(time.Now())
	text, err := s.crypt(ctx, r.GetScope(), Request{Origin: r.GetOrigin(), TopOrigin: r.GetTopOrigin(), Op: OpDecrypt}, r.GetScheme(), r.GetPeerPubkey(), r.GetText())
	if err != nil {
		return nil, err
	}
	return &signerv1.DecryptResponse{Text: text}, nil
}

// crypt encrypts or decrypts (req.Op) text between scope's identity and
// peer.
// Neither the text nor the result ever goes into an error or log record.
func (s *Service) crypt(ctx context.Context, scope string, req Request, scheme signerv1.Scheme, peer, text string) (string, error) {
	id, err := s.lookup(scope)
	if err != nil {
		return "", err
	}
	op, decrypt := string(req.Op), req.Op == OpDecrypt
	req.Pubkey = id.pubkey
	if err := s.check(ctx, scope, req); err != nil {
		return "", err
	}
	nip44 := true
	switch scheme {
	case signerv1.Scheme_SCHEME_UNSPECIFIED, signerv1.Scheme_SCHEME_NIP44:
	case signerv1.Scheme_SCHEME_NIP04:
		nip44 = false
	default:
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: unknown scheme %d: use nip44 or nip04", op, scheme)
	}
	peerHex, err := nostr.ParsePublicKey(peer)
	if err != nil {
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: peer_pubkey: %v", op, err)
	}
	if id.method == signerv1.Method_METHOD_READONLY {
		return "", errReadOnly
	}
	if id.remote != nil {
		return id.remote.crypt(ctx, op, nip44, peerHex, text)
	}
	var out string
	err = id.withKey(func(k *nostr.SecretKey) error {
		var err error
		if !nip44 {
			if decrypt {
				out, err = nostr.Nip04Decrypt(k, peerHex, text)
			} else {
				out, err = nostr.Nip04Encrypt(k, peerHex, text)
			}
			return err
		}
		ck, err := nostr.ConversationKey(k, peerHex)
		if err != nil {
			return err
		}
		defer clear(ck[:])
		if decrypt {
			out, err = nostr.Nip44Decrypt(text, ck)
		} else {
			out, err = nostr.Nip44Encrypt(text, ck)
		}
		return err
	})
	if err != nil {
		if bus.CodeOf(err) != commonv1.ErrorCode_INTERNAL {
			return "", err
		}
		return "", bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "%s: %v", op, err)
	}
	return out, nil
}

// schemeName is how the audit trail names an encryption scheme.
func schemeName(sc signerv1.Scheme) string {
	if sc == signerv1.Scheme_SCHEME_NIP04 {
		return "NIP-04"
	}
	return "NIP-44"
}
