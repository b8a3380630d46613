// Package oauth validates OAuth 2.1 JWT access tokens of one issuer for
// the gateway (a resource server): signature against the issuer's JWKS
// (discovered from its metadata or configured), iss, aud, exp and nbf.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWT checks.
const (
	jwtLeeway        = time.Minute
	jwksMinInterval  = time.Minute     // between fetches once keys are known
	jwksRetryBackoff = 5 * time.Second // between failed fetches while none are
	maxMetadataBytes = 1 << 20
)

// jwtAlgorithms are the signature algorithms accepted (asymmetric only).
var jwtAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Verifier validates JWT access tokens of one issuer (OAuth 2.1
// resource server): signature against the issuer's JWKS, iss, aud, exp and
// nbf.
type Verifier struct {
	issuer, audience string
	jwksURL          string // "" = discover from the issuer's metadata
	client           *http.Client
	log              *slog.Logger

	fetchMu sync.Mutex // one fetch at a time

	mu         sync.RWMutex
	keys       *jose.JSONWebKeySet
	fetched    time.Time // last attempt
	fetchErr   error     // of the last attempt
	discovered string    // JWKS URL found in the issuer's metadata
}

// Subject is who a verified token names.
type Subject struct {
	// ID is "oauth:" and a digest of the issuer and subject: it owns
	// sessions, never shown.
	ID string
	// Name is "oauth:<sub>" (clipped), for the audit trail.
	Name string
}

// Verify checks a JWT and returns its subject.
func (v *Verifier) Verify(ctx context.Context, raw string) (Subject, error) {
	tok, err := jwt.ParseSigned(raw, jwtAlgorithms)
	if err != nil {
		return Subject{}, fmt.Errorf("not a signed JWT with an accepted algorithm: %w", err)
	}
	if len(tok.Headers) != 1 {
		return Subject{}, errors.New("JWT has more than one signature")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return Subject{}, fmt.Errorf("JWT claims: %w", err)
	}
	// Another issuer's token would only make us fetch keys in vain.
	if unverified.Issuer != v.issuer {
		return Subject{}, fmt.Errorf("JWT issuer %q is not the configured issuer %q", clipClaim(unverified.Issuer, 200), v.issuer)
	}
	h := tok.Headers[0]
	keys, err := v.keysFor(ctx, h.KeyID)
	if err != nil {
		return Subject{}, err
	}
	var claims jwt.Claims
	verified := false
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if tok.Claims(k.Key, &claims) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Subject{}, fmt.Errorf("JWT signature does not verify with the issuer's keys (kid %q, alg %s)", clipClaim(h.KeyID, 100), h.Algorithm)
	}
	if claims.Expiry == nil {
		return Subject{}, errors.New("JWT has no expiry (exp)")
	}
	if claims.Subject == "" {
		return Subject{}, errors.New("JWT has no subject (sub)")
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{
		Issuer: v.issuer, AnyAudience: jwt.Audience{v.audience}, Time: time.Now(),
	}, jwtLeeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrInvalidAudience):
			return Subject{}, fmt.Errorf("JWT audience %q does not include %q", claims.Audience, v.audience)
		case errors.Is(err, jwt.ErrExpired):
			return Subject{}, fmt.Errorf("JWT expired at %s", claims.Expiry.Time().UTC().Format(time.RFC3339))
		case errors.Is(err, jwt.ErrNotValidYet):
			return Subject{}, errors.New("JWT is not valid yet (nbf)")
		}
		return Subject{}, fmt.Errorf("JWT claims: %w", err)
	}
	sum := sha256.Sum256([]byte(claims.Issuer + "\x00" + claims.Subject))
	return Subject{
		ID:   "oauth:" + hex.EncodeToString(sum[:16]),
		Name: "oauth:" + clipClaim(claims.Subject, 128),
	}, nil
}

func clipClaim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// keysFor returns the issuer's signing keys for kid (all of them when kid
// is empty), fetching the JWKS when it has none for kid: at most once per
// jwksMinInterval, so that made-up key ids cannot make us hammer the
// issuer.
func (v *Verifier) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if keys := v.lookup(kid); len(keys) > 0 {
		return keys, nil
	}
	if err := v.Refresh(ctx); err != nil {
		return nil, err
	}
	if keys := v.lookup(kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, fmt.Errorf("the issuer's JWKS has no signing key with kid %q", clipClaim(kid, 100))
}

func (v *Verifier) lookup(kid string) []jose.JSONWebKey {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.keys == nil {
		return nil
	}
	if kid == "" {
		return v.keys.Keys
	}
	return v.keys.Key(kid)
}

// refresh fetches the JWKS unless it was fetched lately.
// Refresh fetches the JWKS unless it was fetched lately.
func (v *Verifier) Refresh(ctx context.Context) error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.mu.RLock()
	have, last, lastErr := v.keys != nil, v.fetched, v.fetchErr
	v.mu.RUnlock()
	wait := jwksMinInterval
	if !have {
		wait = jwksRetryBackoff
	}
	if !last.IsZero() && time.Since(last) < wait {
		if !have && lastErr != nil {
			return fmt.Errorf("the issuer's signing keys are unavailable: %w", lastErr)
		}
		return nil
	}
	// Detached from the request: one client giving up must not fail the
	// fetch for the others waiting on it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	keys, err := v.fetch(fctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fetched, v.fetchErr = time.Now(), err
	if err != nil {
		if v.keys == nil {
			return fmt.Errorf("the issuer's signing keys are unavailable: %w", err)
		}
		v.log.Warn("OAuth: refreshing the issuer's signing keys failed; keeping the known ones", "err", err)
		return nil
	}
	v.keys = keys
	return nil
}

// fetch reads the JWKS, discovering its URL from the issuer's metadata
// when none is configured.
func (v *Verifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	jwksURL := v.jwksURL
	if jwksURL == "" {
		v.mu.RLock()
		jwksURL = v.discovered
		v.mu.RUnlock()
	}
	if jwksURL == "" {
		u, err := v.discover(ctx)
		if err != nil {
			return nil, err
		}
		jwksURL = u
		v.mu.Lock()
		v.discovered = u
		v.mu.Unlock()
	}
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, v.client, jwksURL, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	out := &jose.JSONWebKeySet{}
	for _, k := range set.Keys {
		if k.Use == "enc" || !k.Valid() || !k.IsPublic() {
			continue
		}
		out.Keys = append(out.Keys, k)
	}
	if len(out.Keys) == 0 {
		return nil, fmt.Errorf("JWKS at %s holds no public signing key", jwksURL)
	}
	return out, nil
}

// discover finds the JWKS URL in the issuer's OpenID Connect or OAuth
// authorization server metadata (RFC 8414).
func (v *Verifier) discover(ctx context.Context) (string, error) {
	var errs []error
	for _, u := range metadataURLs(v.issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, v.client, u, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Issuer != v.issuer {
			errs = append(errs, fmt.Errorf("%s names issuer %q, not %q", u, meta.Issuer, v.issuer))
			continue
		}
		if meta.JWKSURI == "" {
			errs = append(errs, fmt.Errorf("%s has no jwks_uri", u))
			continue
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("discover the issuer's JWKS (or set --oauth-jwks-url): %w", errors.Join(errs...))
}

// metadataURLs are where an issuer's metadata may be: OpenID Connect
// Discovery, then RFC 8414 (path inserted after the well-known prefix).
func metadataURLs(issuer string) []string {
	trimmed := strings.TrimSuffix(issuer, "/")
	out := []string{trimmed + "/.well-known/openid-configuration"}
	if u, err := url.Parse(trimmed); err == nil {
		path := u.Path
		u.Path = "/.well-known/oauth-authorization-server" + path
		out = append(out, u.String())
	}
	return out
}

func getJSON(ctx context.Context, client *http.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxMetadataBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", u, maxMetadataBytes)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: not the expected JSON: %w", u, err)
	}
	return nil
}

// ValidURL checks an issuer, JWKS or public URL: https, or http on a
// loopback host (development and tests).
func ValidURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an absolute URL like https://auth.example.com (no query or fragment)", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); strings.EqualFold(u.Hostname(), "localhost") || ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("%q: use https (plain http only on loopback)", s)
	}
	return fmt.Errorf("%q: the scheme must be https", s)
}

// New returns the verifier of issuer's tokens for audience; jwksURL ""
// discovers the keys from the issuer's metadata.
func New(issuer, audience, jwksURL string, log *slog.Logger) *Verifier {
	return &Verifier{issuer: issuer, audience: audience, jwksURL: jwksURL,
		client: &http.Client{Timeout: 10 * time.Second}, log: log}
}

// Issuer is the issuer whose tokens v accepts.
func (v *Verifier) Issuer() string { return v.issuer }
