package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
)

// Saved storage in the admin API: an operator imports a login made
// elsewhere (a Playwright storageState file) as a caller's saved storage,
// which that caller's sessions then start from with open's storage
// argument, or exports one. Export hands out live logins, so it needs
// --storage-export on top of the admin token, as profile export does.
//
//	PUT  /admin/storage/{owner}/{name}          body: storageState JSON → the summary
//	GET  /admin/storage/{owner}/{name}/export   → storageState JSON (only with --storage-export)
//	POST /admin/storage/{owner}/{name}/move     body: {"from_scope": "<24 hex>"} → the summary
//
// owner is the caller: an API token's name or token:<id>, oauth:<digest>
// as the session list shows an OAuth subject, or anonymous. move hands a
// saved storage that an older gateway kept under a caller's shortened
// label (a scope the gateway's start could not tell the owner of, and
// named in its warning) to its owner.

// Storage imports and exports saved storage (the gateway implements it
// with the browser workers, which hold the key that seals it).
type Storage interface {
	// Import stores state (storageState JSON) as owner's saved storage
	// name and returns its summary (names, domains, counts; no value).
	Import(ctx context.Context, owner, name string, state []byte) (json.RawMessage, error)
	// Export returns owner's saved storage name as storageState JSON.
	Export(ctx context.Context, owner, name string) ([]byte, error)
	// Move makes the saved storage name of the legacy scope fromScope
	// owner's and returns its summary.
	Move(ctx context.Context, fromScope, owner, name string) (json.RawMessage, error)
}

// MaxStorageBody is the largest storageState the API takes.
const MaxStorageBody = 2 << 20

var (
	storageOwnerPattern = regexp.MustCompile(`^[A-Za-z0-9_.@:+-]{1,128}$`)
	storageNamePattern  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
)

// storageRoute checks {owner} and {name} and that saved storage is
// configured; when it returns false it has answered.
func (c *Console) storageRoute(w http.ResponseWriter, r *http.Request) (Storage, string, string, bool) {
	owner, name := r.PathValue("owner"), r.PathValue("name")
	switch {
	case !storageOwnerPattern.MatchString(owner):
		apiError(w, http.StatusBadRequest, fmt.Sprintf("bad owner %q: the caller (a token's name, token:<id>, oauth:<digest> or anonymous) must match %s", owner, storageOwnerPattern))
	case !storageNamePattern.MatchString(name):
		apiError(w, http.StatusBadRequest, fmt.Sprintf("bad storage name %q: it must match %s", name, storageNamePattern))
	case c.cfg.Admin.Storage == nil:
		notConfigured(w, "saved storages")
	default:
		return c.cfg.Admin.Storage, owner, name, true
	}
	return nil, "", "", false
}

func (c *Console) adminStoragePut(w http.ResponseWriter, r *http.Request) {
	s, owner, name, ok := c.storageRoute(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r, MaxStorageBody, "storageState")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	sum, err := s.Import(ctx, owner, name, body)
	if err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("saved storage imported", "owner", owner, "storage", name, "client", clientIP(r))
	writeJSON(w, http.StatusOK, sum)
}

func (c *Console) adminStorageExport(w http.ResponseWriter, r *http.Request) {
	s, owner, name, ok := c.storageRoute(w, r)
	if !ok {
		return
	}
	if !c.cfg.Admin.StorageExport {
		apiError(w, http.StatusForbidden, "storage export is off: an exported storage holds the session cookies of every site it is logged in to; "+
			"set SOVEREIGN_STORAGE_EXPORT=1 on the gateway to allow it, and unset it afterwards")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	state, err := s.Export(ctx, owner, name)
	if err != nil {
		adminFail(w, err)
		return
	}
	c.log.Warn("saved storage exported (it holds login state)", "owner", owner, "storage", name, "client", clientIP(r))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.json"`, name))
	_, _ = w.Write(state)
}

func (c *Console) adminStorageMove(w http.ResponseWriter, r *http.Request) {
	s, owner, name, ok := c.storageRoute(w, r)
	if !ok {
		return
	}
	body, ok := readBody(w, r, 4<<10, "move request")
	if !ok {
		return
	}
	var req struct {
		FromScope string `json:"from_scope"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.FromScope == "" {
		apiError(w, http.StatusBadRequest, `the body must be {"from_scope": "<the scope the gateway's warning named>"}`)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	sum, err := s.Move(ctx, req.FromScope, owner, name)
	if err != nil {
		adminFail(w, err)
		return
	}
	c.log.Info("legacy saved storage moved", "owner", owner, "storage", name, "scope", req.FromScope, "client", clientIP(r))
	writeJSON(w, http.StatusOK, sum)
}
