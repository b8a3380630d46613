package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"
)

// The admin API (/admin/…): what operators script against to deploy
// tools and profiles to the fleet. Every route needs
// "Authorization: Bearer <admin token>" — a console login cookie is not
// enough, so a page in the operator's browser can never call it — and
// answers JSON: {"error": "…"} with 400 (bad input), 401 (no or a wrong
// token), 403 (export switched off), 404 (unknown name), 413 (too large).
// Without an admin token the console, and these routes with it, are not
// mounted at all.

// Errors an admin source wraps to choose the status of its answer.
var (
	// ErrInvalid: the request is wrong (a bad script, an unsafe archive
	// path, a bad name): 400.
	ErrInvalid = errors.New("invalid")
	// ErrTooLarge: a body or an archive's contents exceed a limit: 413.
	ErrTooLarge = errors.New("too large")
)

// ScriptInfo is one script as the admin API shows it.
type ScriptInfo struct {
	Name string `json:"name"`
	// Tools are the tool names it serves (stem__name).
	Tools []string `json:"tools"`
	// Skipped are its tools left out, each with why (a name clash).
	Skipped []string `json:"skipped"`
	// Error is why it failed to load ("" when it loaded).
	Error   string    `json:"error,omitempty"`
	Size    int       `json:"size"`
	Updated time.Time `json:"updated,omitzero"`
}

// Scripts manages the script tools (the gateway implements it on the
// fleet's script store).
type Scripts interface {
	// List returns every stored script, those that fail to load with
	// their error.
	List(ctx context.Context) ([]ScriptInfo, error)
	// Get returns a script's source (ErrNotFound when there is none).
	Get(ctx context.Context, name string) ([]byte, error)
	// Validate loads src as script name without storing it; a script that
	// does not load is an ErrInvalid error saying why.
	Validate(ctx context.Context, name string, src []byte) (ScriptInfo, error)
	// Put validates and stores src as script name; every gateway loads it.
	Put(ctx context.Context, name string, src []byte) (ScriptInfo, error)
	// Delete removes a script (ErrNotFound when there is none).
	Delete(ctx context.Context, name string) error
}

// ProfileInfo is one base profile as the admin API shows it.
type ProfileInfo struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"` // the stored (filtered) archive
	Files   int       `json:"files"`
	Digest  string    `json:"digest"`
	Updated time.Time `json:"updated,omitzero"`
	// Dropped and Skipped count the entries the upload filter dropped and
	// the special entries (symlinks, devices) it skipped (on Put only).
	Dropped int `json:"dropped,omitempty"`
	Skipped int `json:"skipped,omitempty"`
}

// Profiles manages base profiles (tar.gz archives in the fleet's object
// store).
type Profiles interface {
	List(ctx context.Context) ([]ProfileInfo, error)
	// Put filters and stores the archive read from r (ErrInvalid for an
	// unsafe path or a broken archive, ErrTooLarge past a limit).
	Put(ctx context.Context, name string, r io.Reader) (ProfileInfo, error)
	Delete(ctx context.Context, name string) error
	// Export writes the stored archive, filtered again, to w.
	Export(ctx context.Context, name string, w io.Writer) error
}

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Target  string   `json:"target"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Errors are the scripts (or HTTP tools) that failed to load, with why.
	Errors []string `json:"errors"`
	// Tools is how many tools the gateway serves now.
	Tools int `json:"tools"`
}

// Admin are the admin API's sources. A nil field answers 404 "not
// configured" on its routes.
type Admin struct {
	Scripts  Scripts
	Profiles Profiles
	// Reload re-reads target ("scripts", "profiles" or "all"; name limits
	// a script reload to one script) on every gateway.
	Reload func(ctx context.Context, target, name string) (ReloadResult, error)
	// HTTPTools returns the custom HTTP tools file and its load errors;
	// PutHTTPTools replaces it for the fleet.
	HTTPTools    func(ctx context.Context) (file []byte, errs []string, err error)
	PutHTTPTools func(ctx context.Context, file []byte) (ReloadResult, error)
	// ProfileExport allows GET /admin/profiles/{name}/export
	// (SOVEREIGN_PROFILE_EXPORT=1): an exported profile holds the session
	// cookies and saved passwords of every site it is logged in to.
	ProfileExport bool
	// MaxProfileUpload bounds an uploaded archive (bytes; 200 MiB when 0).
	MaxProfileUpload int64
	// Storage imports and exports saved storage (storage.go);
	// StorageExport allows its export (SOVEREIGN_STORAGE_EXPORT=1).
	Storage       Storage
	StorageExport bool
}

// Limits of admin request bodies.
const (
	// MaxScriptBody is the largest script source the API takes.
	MaxScriptBody = 256 << 10
	// MaxToolsFileBody is the largest HTTP tools file.
	MaxToolsFileBody = 1 << 20
	// DefaultMaxProfileUpload is the archive limit when none is set
	// (SOVEREIGN_PROFILE_MAX_UPLOAD_MB=200).
	DefaultMaxProfileUpload = 200 << 20
)

// adminTimeout bounds an admin call to its source (a profile upload
// streams into the object store: longer).
const (
	adminTimeout  = 30 * time.Second
	uploadTimeout = 10 * time.Minute
)

// namePattern is what a script stem or profile name may be; it also rules
// out path traversal.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// profileNamePattern allows "-" too, as profile directories often have.
var profileNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func (c *Console) adminRoutes(m *http.ServeMux) {
	m.Handle("GET /admin/scripts", c.bearer(c.adminScripts))
	m.Handle("GET /admin/scripts/{name}", c.bearer(c.adminScriptGet))
	m.Handle("PUT /admin/scripts/{name}", c.bearer(c.adminScriptPut))
	m.Handle("POST /admin/scripts/{name}/validate", c.bearer(c.adminScriptValidate))
	m.Handle("DELETE /admin/scripts/{name}", c.bearer(c.adminScriptDelete))
	m.Handle("GET /admin/profiles", c.bearer(c.adminProfiles))
	m.Handle("PUT /admin/profiles/{name}", c.bearer(c.adminProfilePut))
	m.Handle("DELETE /admin/profiles/{name}", c.bearer(c.adminProfileDelete))
	m.Handle("GET /admin/profiles/{name}/export", c.bearer(c.adminProfileExport))
	m.Handle("PUT /admin/storage/{owner}/{name}", c.bearer(c.adminStoragePut))           // storage.go
	m.Handle("GET /admin/storage/{owner}/{name}/export", c.bearer(c.adminStorageExport)) // storage.go
	m.Handle("POST /admin/storage/{owner}/{name}/move", c.bearer(c.adminStorageMove))    // storage.go
	m.Handle("GET /admin/http-tools", c.bearer(c.adminHTTPTools))
	m.Handle("PUT /admin/http-tools", c.bearer(c.adminHTTPToolsPut))
	m.Handle("POST /admin/reload", c.bearer(c.adminReload))
	m.Handle("GET /admin/sessions", c.bearer(c.apiSessions))
	m.Handle("DELETE /admin/sessions/{id}", c.bearer(c.apiClose))
	m.Handle("POST /admin/sessions/{id}/close", c.bearer(c.apiClose))
	m.Handle("/admin/", c.bearer(func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("no admin route %s %s (see docs/extending.md)", r.Method, r.URL.Path))
	}))
}

// bearer lets a request through only with the admin token as a Bearer
// header: the admin API takes no cookie.
func (c *Console) bearer(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", realm)
			apiError(w, http.StatusUnauthorized, "unauthorized: the admin API needs Authorization: Bearer <admin token> (SOVEREIGN_ADMIN_TOKEN)")
			return
		}
		if _, ok := c.authenticate(w, r); !ok { // checks the token in constant time, rate-limits failures
			return
		}
		next(w, r)
	})
}

// adminStatus maps a source's error to the answer's status.
func adminStatus(err error) int {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

func adminFail(w http.ResponseWriter, err error) {
	apiError(w, adminStatus(err), err.Error())
}

func notConfigured(w http.ResponseWriter, what string) {
	apiError(w, http.StatusNotFound, what+" are not configured on this gateway")
}

// readBody reads at most max bytes of the request body; more is 413.
func readBody(w http.ResponseWriter, r *http.Request, max int64, what string) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s too large: the limit is %d bytes", what, max))
		return nil, false
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "read the request body: "+err.Error())
		return nil, false
	}
	return b, true
}

// scriptRoute checks the {name} of a script route and that scripts are
// configured; when it returns false it has answered.
func (c *Console) scriptRoute(w http.ResponseWriter, r *http.Request) (Scripts, string, bool) {
	name := r.PathValue("name")
	if !namePattern.MatchString(name) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("bad script name %q: it must match %s (lower-case letter first; it becomes the tools' namespace, as in %s__search)",
			name, namePattern, "jira"))
		return nil, "", false
	}
	if c.cfg.Admin.Scripts == nil {
		notConfigured(w, "script tools")
		return nil, "", false
	}
	return c.cfg.Admin.Scripts, name, true
}

func (c *Console) adminScripts(w http.ResponseWriter, r *http.Request) {
	s := c.cfg.Admin.Scripts
	if s == nil {
		notConfigured(w, "script tools")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	list, err := s.List(ctx)
	if err != nil {
		adminFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"scripts": nonNil(list)})
}

func (c *Console) adminScriptGet(w http.ResponseWriter, r *http.Request) {
	s, name, ok := c.scriptRoute(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	src, err := s.Get(ctx, name)
	if err != nil {
		adminFail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write(src)
}

func (c *Console) adminScriptPut(w http.ResponseWriter, r *http.Request) {
	c.scriptWrite(w, r, false)
}

func (c *Console) adminScriptValidate(w http.ResponseWriter, r *http.Request) {
	c.scriptWrite(w, r, true)
}

func (c *Console) scriptWrite(w http.ResponseWriter, r *http.Request, validateOnly bool) {
	s, name, ok := c.scriptRoute(w, r)
	if !ok {
		return
	}
	src, ok := readBody(w, r, MaxScriptBody, "script")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	var info ScriptInfo
	var err error
	if validateOnly {
		info, err = s.Validate(ctx, name, src)
	} else {
		info, err = s.Put(ctx, name, src)
	}
	if err != nil {
		adminFail(w, err)
		return
	}
	if !validateOnly {
		c.log.Info("script deployed", "script", name, "tools", info.Tools, "skipped", info.Skipped)
	}
	info.Tools, info.Skipped = nonNil(info.Tools), nonNil(info.Skipped)
	writeJSON(w, http.StatusOK, info)
}

func (c *Console) adminScriptDelete(w http.ResponseWriter, r *http.Request) {
	s, name, ok := c.scriptRoute(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if err := s.Delete(ctx, name); err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("script deleted", "script", name)
	writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
}

// profileRoute checks the {name} of a profile route and that profiles are
// configured; when it returns false it has answered.
func (c *Console) profileRoute(w http.ResponseWriter, r *http.Request) (Profiles, string, bool) {
	name := r.PathValue("name")
	if !profileNamePattern.MatchString(name) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("bad profile name %q: it must match %s", name, profileNamePattern))
		return nil, "", false
	}
	if c.cfg.Admin.Profiles == nil {
		notConfigured(w, "base profiles")
		return nil, "", false
	}
	return c.cfg.Admin.Profiles, name, true
}

func (c *Console) adminProfiles(w http.ResponseWriter, r *http.Request) {
	p := c.cfg.Admin.Profiles
	if p == nil {
		notConfigured(w, "base profiles")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	list, err := p.List(ctx)
	if err != nil {
		adminFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"profiles": nonNil(list), "export": c.cfg.Admin.ProfileExport})
}

func (c *Console) adminProfilePut(w http.ResponseWriter, r *http.Request) {
	p, name, ok := c.profileRoute(w, r)
	if !ok {
		return
	}
	max := c.cfg.Admin.MaxProfileUpload
	if max <= 0 {
		max = DefaultMaxProfileUpload
	}
	if r.ContentLength > max {
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("profile archive too large: %d bytes; the limit is %d (SOVEREIGN_PROFILE_MAX_UPLOAD_MB)", r.ContentLength, max))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), uploadTimeout)
	defer cancel()
	info, err := p.Put(ctx, name, &limitedBody{r: http.MaxBytesReader(w, r.Body, max), max: max})
	if err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("base profile stored", "profile", name, "files", info.Files, "bytes", info.Size, "dropped", info.Dropped, "skipped", info.Skipped)
	writeJSON(w, http.StatusOK, info)
}

// limitedBody turns the body limit's error into ErrTooLarge, so the
// source's error maps to 413 however it wraps it.
type limitedBody struct {
	r   io.Reader
	max int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		err = fmt.Errorf("%w: the archive is larger than %d bytes (SOVEREIGN_PROFILE_MAX_UPLOAD_MB)", ErrTooLarge, l.max)
	}
	return n, err
}

func (c *Console) adminProfileDelete(w http.ResponseWriter, r *http.Request) {
	p, name, ok := c.profileRoute(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if err := p.Delete(ctx, name); err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("base profile deleted", "profile", name)
	writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
}

func (c *Console) adminProfileExport(w http.ResponseWriter, r *http.Request) {
	p, name, ok := c.profileRoute(w, r)
	if !ok {
		return
	}
	if !c.cfg.Admin.ProfileExport {
		apiError(w, http.StatusForbidden, "profile export is off: an exported profile holds the session cookies and saved passwords of every site it is logged in to; "+
			"set SOVEREIGN_PROFILE_EXPORT=1 on the gateway to allow it, and unset it afterwards")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), uploadTimeout)
	defer cancel()
	// Written to a buffer first: a failure must be an error answer, not a
	// truncated archive with status 200.
	var buf bytes.Buffer
	if err := p.Export(ctx, name, &buf); err != nil {
		adminFail(w, err)
		return
	}
	c.log.Warn("base profile exported (it holds login state)", "profile", name, "bytes", buf.Len(), "client", clientIP(r))
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.tar.gz"`, name))
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) adminHTTPTools(w http.ResponseWriter, r *http.Request) {
	get := c.cfg.Admin.HTTPTools
	if get == nil {
		notConfigured(w, "custom HTTP tools")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	file, errs, err := get(ctx)
	if err != nil {
		adminFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"file": jsonOrString(file), "errors": nonNil(errs)})
}

func (c *Console) adminHTTPToolsPut(w http.ResponseWriter, r *http.Request) {
	put := c.cfg.Admin.PutHTTPTools
	if put == nil {
		notConfigured(w, "custom HTTP tools")
		return
	}
	file, ok := readBody(w, r, MaxToolsFileBody, "tools file")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	res, err := put(ctx, file)
	if err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("custom HTTP tools deployed", "added", res.Added, "removed", res.Removed, "errors", len(res.Errors))
	writeJSON(w, http.StatusOK, reloadView(res))
}

func (c *Console) adminReload(w http.ResponseWriter, r *http.Request) {
	reload := c.cfg.Admin.Reload
	if reload == nil {
		notConfigured(w, "reloads")
		return
	}
	var req struct {
		Target string `json:"target"`
		Name   string `json:"name"`
	}
	body, ok := readBody(w, r, 4096, "reload request")
	if !ok {
		return
	}
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			apiError(w, http.StatusBadRequest, "reload: the body must be {\"target\": \"scripts\"|\"profiles\"|\"all\", \"name\": \"…\"}: "+err.Error())
			return
		}
	}
	if req.Target == "" {
		req.Target = "scripts"
	}
	switch req.Target {
	case "scripts", "profiles", "all":
	default:
		apiError(w, http.StatusBadRequest, fmt.Sprintf("reload: unknown target %q (scripts, profiles or all)", req.Target))
		return
	}
	if req.Name != "" && (req.Target == "profiles" || !namePattern.MatchString(req.Name)) {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("reload: name %q must be a script name (%s), with target scripts or all", req.Name, namePattern))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	res, err := reload(ctx, req.Target, req.Name)
	if err != nil {
		adminFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reloadView(res))
}

func reloadView(r ReloadResult) ReloadResult {
	r.Added, r.Removed, r.Errors = nonNil(r.Added), nonNil(r.Removed), nonNil(r.Errors)
	return r
}

// jsonOrString returns file as raw JSON when it is JSON, else as a string.
func jsonOrString(file []byte) any {
	if json.Valid(file) {
		return json.RawMessage(file)
	}
	return string(file)
}

// decodeStrict decodes one JSON object into v, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
