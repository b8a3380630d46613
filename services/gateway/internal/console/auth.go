package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Login sessions are HMAC-signed cookies rather than ids kept in memory:
// the value holds a random nonce, the expiry and the operator's name,
// signed with a key derived from the admin token. So every gateway replica
// with the same token accepts the login, a restart does not log operators
// out, and changing the admin token ends every login. Logout revokes the
// cookie's nonce on the replica that served it (and the browser drops the
// cookie); a copied cookie stays valid elsewhere until it expires, which is
// why logins last only 12 hours.

const (
	cookieName = "sov_console"
	// loginLimit is how many failed logins (form or Bearer) one client
	// address may make per minute.
	loginLimit = 10
	realm      = `Bearer realm="sovereign-admin"`
)

type cookieKeys struct {
	mac   []byte   // HMAC key of cookies
	token [32]byte // SHA-256 of the admin token, for constant-time compares
}

func newCookieKeys(token string) *cookieKeys {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("sovereign console session cookie v1"))
	return &cookieKeys{mac: m.Sum(nil), token: sha256.Sum256([]byte(token))}
}

// tokenOK compares a presented token with the admin token in constant time
// (both hashed first, so their lengths do not leak either).
func (k *cookieKeys) tokenOK(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], k.token[:]) == 1
}

func (k *cookieKeys) sign(payload string) string {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// login is an authenticated operator.
type login struct {
	name   string // shown in decisions as console:<name>
	nonce  string // of the cookie; "" for Bearer requests
	bearer bool
	expiry time.Time
}

// mint returns a cookie value for name valid until expiry.
func (k *cookieKeys) mint(name string, expiry time.Time) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	payload := "v1." + strconv.FormatInt(expiry.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(b) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(name))
	return payload + "." + k.sign(payload)
}

// parse checks a cookie value's signature and expiry.
func (k *cookieKeys) parse(v string, now time.Time) (login, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return login{}, false
	}
	payload, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(k.sign(payload))) {
		return login{}, false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return login{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() >= exp {
		return login{}, false
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil {
		return login{}, false
	}
	return login{name: string(name), nonce: parts[2], expiry: time.Unix(exp, 0)}, true
}

type loginKey struct{}

func loginFrom(ctx context.Context) login {
	l, _ := ctx.Value(loginKey{}).(login)
	return l
}

// by is the DecidedBy of a decision made by this request's operator.
func by(r *http.Request) string {
	return "console:" + loginFrom(r.Context()).name
}

// isAPI reports whether a path is a JSON route (401 instead of a redirect
// to the login page).
func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/")
}

// authed lets a request through with a valid Bearer token or login cookie.
// Others get 401 (API routes) or a redirect to /login (pages). A state
// change riding on the cookie must also come from the console's own origin.
func (c *Console) authed(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !l.bearer && !sameOrigin(r) {
			c.forbidCrossSite(w, r)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), loginKey{}, l)))
	})
}

// authenticate finds the request's login, answering the request itself when
// there is none.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (login, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(h, " ")
		ip := clientIP(r)
		if wait := c.limiter.blocked(ip); wait > 0 {
			tooMany(w, r, wait)
			return login{}, false
		}
		if !strings.EqualFold(scheme, "Bearer") || !c.cookies.tokenOK(strings.TrimSpace(tok)) {
			c.limiter.fail(ip)
			c.log.Warn("admin request with a wrong token refused", "client", ip, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token"`)
			apiError(w, http.StatusUnauthorized, "unauthorized: the Bearer token is not the admin token (SOVEREIGN_ADMIN_TOKEN)")
			return login{}, false
		}
		return login{name: "api", bearer: true}, true
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		if l, ok := c.cookies.parse(ck.Value, c.cfg.Now()); ok && !c.isRevoked(l.nonce) {
			return l, true
		}
	}
	if isAPI(r) {
		w.Header().Set("WWW-Authenticate", realm)
		apiError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <admin token> (SOVEREIGN_ADMIN_TOKEN), or log in at /login")
		return login{}, false
	}
	next := "/"
	if r.Method == http.MethodGet {
		next = r.URL.RequestURI()
	}
	http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
	return login{}, false
}

func (c *Console) isRevoked(nonce string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	for n, exp := range c.revoked {
		if now.After(exp) {
			delete(c.revoked, n)
		}
	}
	_, ok := c.revoked[nonce]
	return ok
}

func (c *Console) forbidCrossSite(w http.ResponseWriter, r *http.Request) {
	c.log.Warn("cross-site admin request refused", "client", clientIP(r), "path", r.URL.Path,
		"origin", r.Header.Get("Origin"))
	msg := "forbidden: this request did not come from the console's own pages (its Origin or Referer is another site or missing)"
	if isAPI(r) {
		apiError(w, http.StatusForbidden, msg+"; scripts send Authorization: Bearer <admin token> instead of the cookie")
		return
	}
	http.Error(w, msg, http.StatusForbidden)
}

// sameOrigin reports whether r's Origin (or, without one, its Referer)
// names the host the request was sent to. Browsers send Origin on every
// POST; a request with neither is refused, since only a browser carries the
// cookie.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" || src == "null" {
		return false
	}
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// hostAllowed is the DNS-rebinding check: a rebinding attack needs a host
// name the attacker controls, so IP literals are safe, as are localhost
// and the names the console was configured with.
func (c *Console) hostAllowed(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, h := range c.cfg.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// clientIP is the address failed logins are counted by.
func clientIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

func tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int(wait.Round(time.Second) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	msg := fmt.Sprintf("too many failed logins from %s: wait %d seconds and try again", clientIP(r), max(secs, 1))
	if isAPI(r) || r.Header.Get("Authorization") != "" {
		apiError(w, http.StatusTooManyRequests, msg)
		return
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// limiter counts failed logins per client address in a sliding window.
type limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	fails map[string][]time.Time
}

func newLimiter(max int, window time.Duration, now func() time.Time) *limiter {
	return &limiter{max: max, window: window, now: now, fails: map[string][]time.Time{}}
}

// blocked returns how long ip must wait before its next attempt, 0 when it
// may try now.
func (l *limiter) blocked(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	list := l.prune(ip, now)
	if len(list) < l.max {
		return 0
	}
	return list[0].Add(l.window).Sub(now)
}

func (l *limiter) fail(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.fails[ip] = append(l.prune(ip, now), now)
	if len(l.fails) > 10000 { // bound the memory under a spray of addresses
		for k := range l.fails {
			if len(l.prune(k, now)) == 0 {
				delete(l.fails, k)
			}
		}
	}
}

func (l *limiter) prune(ip string, now time.Time) []time.Time {
	list := l.fails[ip]
	i := 0
	for i < len(list) && now.Sub(list[i]) >= l.window {
		i++
	}
	list = list[i:]
	if len(list) == 0 {
		delete(l.fails, ip)
		return nil
	}
	l.fails[ip] = list
	return list
}

// loginPage shows the login form.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.renderLogin(w, http.StatusOK, r.URL.Query().Get("next"), "")
}

// login checks the token of the login form and sets the cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.forbidCrossSite(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad login form: "+err.Error(), http.StatusBadRequest)
		return
	}
	next := r.PostForm.Get("next")
	ip := clientIP(r)
	if wait := c.limiter.blocked(ip); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int(wait/time.Second), 1)))
		c.renderLogin(w, http.StatusTooManyRequests, next,
			fmt.Sprintf("Too many failed logins from %s. Wait %d seconds and try again.", ip, max(int(wait.Round(time.Second)/time.Second), 1)))
		return
	}
	if !c.cookies.tokenOK(r.PostForm.Get("token")) {
		c.limiter.fail(ip)
		c.log.Warn("console login with a wrong token refused", "client", ip)
		c.renderLogin(w, http.StatusUnauthorized, next, "That is not the admin token (SOVEREIGN_ADMIN_TOKEN).")
		return
	}
	name := operatorName(r.PostForm.Get("name"))
	exp := c.cfg.Now().Add(c.cfg.SessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: c.cookies.mint(name, exp), Path: "/",
		Expires: exp, MaxAge: int(c.cfg.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	c.log.Info("console login", "operator", name, "client", ip)
	http.Redirect(w, r, localPath(next), http.StatusSeeOther)
}

// logout revokes the cookie here and clears it in the browser.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if l := loginFrom(r.Context()); l.nonce != "" {
		c.mu.Lock()
		c.revoked[l.nonce] = l.expiry
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// operatorName cleans the optional name of the login form: letters,
// digits and . _ - @, at most 32 characters; "admin" when empty.
func operatorName(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if b.Len() >= 32 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == '@':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 {
		return "admin"
	}
	return b.String()
}

// localPath keeps a redirect target on this site.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.HasPrefix(p, "/login") {
		return "/"
	}
	return p
}
