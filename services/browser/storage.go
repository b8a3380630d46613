package browser

// Saved storage: keeping a login without showing it to the model.
//
// storage_save keeps the session's cookies and the local storage of the
// origins of its open tabs (what a checkpoint keeps, checkpoint.go) under
// a name in the fleet: the JetStream KV bucket <prefix>_browser_storage,
// one key per owner and name, sealed with the operator key as checkpoints
// are (AES-256-GCM, bound to the key). open with storage starts from it in
// any later session of the same owner: the cookies go into the session's
// browser context, the local storage back into each origin before the
// page's own scripts run. The model only ever sees names, domains, origins
// and counts: cookie values and storage contents stay on the workers (no
// result, log, span or audit record holds them).
//
// Owner: OpenSessionRequest.owner after its kind ("mcp:" or "handle:"),
// the gateway's digest of the caller's full identity, so that one
// caller's saved logins are not another caller's. Gateways before that
// sent a 12-character label, which two callers could share; the saved
// storage under such a label's scope (24 hex digits, legacyScopeLen) is
// reachable by no session and waits for the gateway to move it to its
// owner (op "move" of sov.browser.storage, storage_transfer.go).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/browser/internal/page"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

const (
	// DefaultMaxStorageBytes bounds one sealed saved storage when
	// Config.MaxStorageBytes is 0 (the NATS payload limit is 1 MiB by
	// default).
	DefaultMaxStorageBytes = 900 << 10
	// maxStorageList is the most saved storages storage_list shows.
	maxStorageList = 100
)

var storageNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// savedStorage is one saved storage as stored (JSON, then sealed).
type savedStorage struct {
	Name    string            `json:"name"`
	Cookies []*network.Cookie `json:"cookies,omitempty"`
	Storage []originStorage   `json:"storage,omitempty"`
	Time    time.Time         `json:"time"`
}

// storageBucket is the name of the saved storage bucket of prefix.
func storageBucket(prefix string) string { return bus.BucketName(prefix, "_browser_storage") }

// openStorage opens the saved storage bucket when the worker has a key.
func (w *Worker) openStorage(ctx context.Context, c *bus.Conn) error {
	if w.cfg.SecretKey == nil {
		return nil
	}
	kv, err := kvbucket.OpenKV(ctx, c.NATS(), kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      storageBucket(c.Prefix()),
			Description: "Sovereign saved browser storage: cookies and local storage (sealed with the operator key)",
			History:     1,
		},
		Keeps: "browser workers keep saved storage (storage_save)",
	})
	if err != nil {
		return err
	}
	w.storage = kv
	return nil
}

// A workerTool is the handler of a tool that needs the worker's stores
// (catalog.OnWorker), run in session s; the caller holds its lock.
type workerTool func(w *Worker, ctx context.Context, s *session, req *browserv1.ToolRequest) (*browserv1.ToolResult, error)

// workerTools are the saved storage tools.
var workerTools = map[string]workerTool{
	"storage_save": func(w *Worker, ctx context.Context, s *session, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return w.storageSave(ctx, s, r.GetStorageSave().GetName())
	},
	"storage_list": func(w *Worker, ctx context.Context, s *session, _ *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return w.storageList(ctx, s)
	},
	"storage_delete": func(w *Worker, ctx context.Context, s *session, r *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
		return w.storageDelete(ctx, s, r.GetStorageDelete().GetName())
	},
}

// storageCall runs a call that uses saved storage (catalog.Tool.Storage):
// a storage tool, or an open or tab_new that starts from saved storage, in
// s; the caller holds its lock. Its errors are never UNAVAILABLE or
// SESSION_LOST: those tell the gateway that the session is gone.
func (w *Worker) storageCall(ctx context.Context, s *session, tool catalog.Tool, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	if w.storage == nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"saved storage needs the operator secret key on the browser workers (to seal it): set %s or %s", secrets.EnvKey, secrets.EnvKeyFile)
	}
	if tool.Level == catalog.OnWorker {
		return workerTools[tool.Name](w, ctx, s, req)
	}
	return w.openWithStorage(ctx, s, req)
}

// storageKey is the bucket key of name for the owner of s.
func storageKey(s *session, name string) (string, error) {
	if err := checkStorageName(name); err != nil {
		return "", err
	}
	scope, err := ownerScope(s.owner)
	if err != nil {
		return "", err
	}
	return scope + "." + name, nil
}

func checkStorageName(name string) error {
	if !storageNamePattern.MatchString(name) {
		return bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT,
			"storage name %q must be 1-64 characters: a lowercase letter, then lowercase letters, digits, - or _", clipName(name))
	}
	return nil
}

// ownerScope is the key prefix of the saved storage of a session's owner
// ("mcp:<owner digest>"): that of the owner after its kind.
func ownerScope(owner string) (string, error) {
	if _, o, ok := strings.Cut(owner, ":"); ok {
		owner = o
	}
	return callerScope(owner)
}

// callerScope is the key prefix of an owner's saved storage: the whole
// SHA-256 of the owner (64 hex digits; never a shortened one). The owner
// must be a digest (64 hex digits): a label, which older gateways sent,
// may be another caller's too, so it keys nothing.
func callerScope(owner string) (string, error) {
	if b, err := hex.DecodeString(owner); err != nil || len(b) != sha256.Size {
		return "", bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"saved storage is keyed by the digest of the caller's identity (64 hex digits), and the owner is not one (a gateway older than the browser workers sends a shortened label): upgrade the gateways")
	}
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:]), nil
}

// legacyScopeLen is the length of the scopes of gateways before owner
// digests: 24 hex digits, the first 12 bytes of the SHA-256 of a
// caller's label.
const legacyScopeLen = 24

// legacyScope reports whether key is under a legacy scope, and which.
func legacyScope(key string) (scope, name string, ok bool) {
	scope, name, ok = strings.Cut(key, ".")
	if !ok || len(scope) != legacyScopeLen {
		return "", "", false
	}
	if _, err := hex.DecodeString(scope); err != nil {
		return "", "", false
	}
	return scope, name, true
}

// storageSealName binds a sealed record to its key.
func storageSealName(key string) string { return "browser-storage/" + key }

func (w *Worker) maxStorageBytes() int {
	if w.cfg.MaxStorageBytes > 0 {
		return w.cfg.MaxStorageBytes
	}
	return DefaultMaxStorageBytes
}

// storageSave is the storage_save tool.
func (w *Worker) storageSave(ctx context.Context, s *session, name string) (*browserv1.ToolResult, error) {
	key, err := storageKey(s, name)
	if err != nil {
		return nil, err
	}
	cp, err := s.capture(ctx)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "read the session's cookies and storage: %v", err)
	}
	st := &savedStorage{Name: name, Cookies: cp.Cookies, Storage: cp.Storage, Time: time.Now().UTC()}
	if err := w.putStorage(ctx, key, st, "close the tabs of sites you do not need and save again"); err != nil {
		return nil, err
	}
	w.log.InfoContext(ctx, "storage saved", "session", s.id, "cookies", len(st.Cookies), "origins", len(st.Storage))
	sum := summarize(st)
	return result(fmt.Sprintf("Saved storage %q: %s. Start from it with open's storage argument (values are never shown).", name, sum.Line()), map[string]any{"storage": sum})
}

// storageSummary is what the model may know of a saved storage: never a
// value.
type storageSummary struct {
	Name          string   `json:"name"`
	Cookies       int      `json:"cookies"`
	CookieDomains []string `json:"cookie_domains"`
	MoreDomains   int      `json:"more_cookie_domains,omitempty"`
	Origins       []string `json:"origins"`
	MoreOrigins   int      `json:"more_origins,omitempty"`
	StorageItems  int      `json:"storage_items"`
	Saved         string   `json:"saved,omitempty"`
}

// putStorage seals st and writes it under key; tooLarge says what to do
// when it is over the limit.
func (w *Worker) putStorage(ctx context.Context, key string, st *savedStorage, tooLarge string) error {
	sealed, err := w.sealStorage(key, st, tooLarge)
	if err != nil {
		return err
	}
	if _, err := w.storage.Put(ctx, key, sealed); err != nil {
		return bus.Errorf(commonv1.ErrorCode_INTERNAL, "write the storage into the fleet: %v", err)
	}
	return nil
}

// sealStorage seals st for key (the seal is bound to the key).
func (w *Worker) sealStorage(key string, st *savedStorage, tooLarge string) ([]byte, error) {
	body, err := json.Marshal(st)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode the storage: %v", err)
	}
	sealed, err := w.cfg.SecretKey.Seal(storageSealName(key), body)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "seal the storage: %v", err)
	}
	if max := w.maxStorageBytes(); len(sealed) > max {
		return nil, bus.Errorf(commonv1.ErrorCode_TOO_LARGE,
			"the cookies and local storage take %d bytes sealed, more than the limit of %d (the worker's --max-storage-kb): %s", len(sealed), max, tooLarge)
	}
	return sealed, nil
}

// summarize says what a saved storage holds, without a value.
func summarize(st *savedStorage) storageSummary {
	sum := storageSummary{Name: st.Name, Cookies: len(st.Cookies), CookieDomains: []string{}, Origins: []string{}}
	if !st.Time.IsZero() {
		sum.Saved = st.Time.Format(time.RFC3339)
	}
	for _, c := range st.Cookies {
		if d := strings.TrimPrefix(c.Domain, "."); !slices.Contains(sum.CookieDomains, d) {
			sum.CookieDomains = append(sum.CookieDomains, d)
		}
	}
	slices.Sort(sum.CookieDomains)
	for _, o := range st.Storage {
		sum.Origins = append(sum.Origins, o.Origin)
		sum.StorageItems += len(o.Items)
	}
	sum.CookieDomains, sum.MoreDomains = firstOf(sum.CookieDomains)
	sum.Origins, sum.MoreOrigins = firstOf(sum.Origins)
	return sum
}

// maxSummaryNames is how many cookie domains and origins a summary names.
const maxSummaryNames = 20

// firstOf returns the first maxSummaryNames names and how many more there
// are; a name is cut to a sane length (a page sets its cookies' domains).
func firstOf(names []string) ([]string, int) {
	more := max(len(names)-maxSummaryNames, 0)
	names = names[:len(names)-more]
	for i, n := range names {
		if len(n) > 200 {
			names[i] = n[:200] + "…"
		}
	}
	return names, more
}

// Line says in one line what a saved storage holds.
func (s storageSummary) Line() string {
	line := fmt.Sprintf("%d cookies", s.Cookies)
	if len(s.CookieDomains) > 0 {
		line += " for " + strings.Join(s.CookieDomains, ", ") + andMore(s.MoreDomains)
	}
	line += fmt.Sprintf("; %d local storage items", s.StorageItems)
	if len(s.Origins) > 0 {
		line += " of " + strings.Join(s.Origins, ", ") + andMore(s.MoreOrigins)
	}
	return line
}

func andMore(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// loadStorage reads and opens the saved storage name of s's owner.
func (w *Worker) loadStorage(ctx context.Context, s *session, name string) (*savedStorage, error) {
	key, err := storageKey(s, name)
	if err != nil {
		return nil, err
	}
	return w.loadKey(ctx, key, name)
}

// loadKey reads and opens the saved storage under key.
func (w *Worker) loadKey(ctx context.Context, key, name string) (*savedStorage, error) {
	e, err := w.storage.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no saved storage %q (storage_list shows the saved ones; storage_save makes one)", name)
	}
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "read saved storage %q: %v", name, err)
	}
	return w.openSealed(key, e.Value())
}

func (w *Worker) openSealed(key string, sealed []byte) (*savedStorage, error) {
	body, err := w.cfg.SecretKey.Open(storageSealName(key), sealed)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "open saved storage (sealed with another operator key?): %v", err)
	}
	var st savedStorage
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "decode saved storage: %v", err)
	}
	return &st, nil
}

// storageList is the storage_list tool: the owner's saved storages.
func (w *Worker) storageList(ctx context.Context, s *session) (*browserv1.ToolResult, error) {
	scope, err := ownerScope(s.owner)
	if err != nil {
		return nil, err
	}
	scope += "."
	lister, err := w.storage.ListKeysFiltered(ctx, scope+"*")
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "list saved storage: %v", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	more := max(len(keys)-maxStorageList, 0)
	keys = keys[:len(keys)-more]
	list := make([]storageSummary, 0, len(keys))
	var b strings.Builder
	for _, k := range keys {
		e, err := w.storage.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		sum := storageSummary{Name: strings.TrimPrefix(k, scope)}
		if st, err := w.openSealed(k, e.Value()); err == nil {
			sum = summarize(st)
		}
		list = append(list, sum)
		fmt.Fprintf(&b, "\n%s (saved %s): %s", sum.Name, sum.Saved, sum.Line())
	}
	head := fmt.Sprintf("%d saved storages", len(list))
	if len(list) == 0 {
		head = "no saved storage (storage_save makes one)"
	}
	if more > 0 {
		head += fmt.Sprintf(" (the first %d; %d more)", maxStorageList, more)
	}
	return result(head+b.String(), map[string]any{"storage": list})
}

// storageDelete is the storage_delete tool.
func (w *Worker) storageDelete(ctx context.Context, s *session, name string) (*browserv1.ToolResult, error) {
	key, err := storageKey(s, name)
	if err != nil {
		return nil, err
	}
	if _, err := w.storage.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, bus.Errorf(commonv1.ErrorCode_NOT_FOUND, "no saved storage %q (storage_list shows the saved ones)", name)
	}
	if err := w.storage.Purge(ctx, key); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "delete saved storage %q: %v", name, err)
	}
	return result(fmt.Sprintf("Deleted saved storage %q", name), map[string]any{"deleted": name})
}

// openWithStorage is open (or tab_new) with storage: the saved cookies
// into the session, then the open as usual with the saved local storage
// put into the tab's pages before their scripts run.
func (w *Worker) openWithStorage(ctx context.Context, s *session, req *browserv1.ToolRequest) (*browserv1.ToolResult, error) {
	name := req.GetOpen().GetStorage()
	if req.GetTabNew() != nil {
		name = req.GetTabNew().GetStorage()
		if strings.TrimSpace(req.GetTabNew().GetUrl()) == "" {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "tab_new with storage needs the url to open")
		}
	}
	st, err := w.loadStorage(ctx, s, name)
	if err != nil {
		return nil, err
	}
	if len(st.Cookies) > 0 {
		bctx, cancel := within(s.browser, ctx)
		_, err := chromedp.CallBrowser(bctx, storage.SetCookies, storage.SetCookiesParams{Cookies: cookieParams(st.Cookies), BrowserContextID: s.bcid})
		cancel()
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "set the saved cookies: %v", err)
		}
	}
	script, err := storageRestoreScript(st.Storage)
	if err != nil {
		return nil, err
	}
	if req.GetTabNew() != nil {
		return w.tabNewWithStorage(ctx, s, req, st, script)
	}
	plain := proto.Clone(req).(*browserv1.ToolRequest)
	plain.GetOpen().Storage = ""
	res, err := w.openRestoring(ctx, s, plain, script)
	return startedFrom(res, err, st)
}

// openRestoring runs an open in the active tab of s with script (the
// saved local storage; "" for none) run first in each new document.
func (w *Worker) openRestoring(ctx context.Context, s *session, open *browserv1.ToolRequest, script string) (*browserv1.ToolResult, error) {
	if script == "" {
		return s.do(ctx, open, w.pageOptions())
	}
	active := s.tabs[s.active]
	tctx, cancel := within(active.ctx, ctx)
	defer cancel()
	added, err := chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: script})
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "prepare the saved local storage: %v", err)
	}
	res, err := s.do(ctx, open, w.pageOptions())
	_, _ = chromedp.Call(tctx, cdppage.RemoveScriptToEvaluateOnNewDocument, cdppage.RemoveScriptToEvaluateOnNewDocumentParams(added))
	return res, err
}

// tabNewWithStorage is tab_new with storage: a blank tab, then the open
// in it as openWithStorage does. When the open fails the tab goes again
// and the session keeps its active tab, as a failed tab_new does.
func (w *Worker) tabNewWithStorage(ctx context.Context, s *session, req *browserv1.ToolRequest, st *savedStorage, script string) (*browserv1.ToolResult, error) {
	prev := s.active
	blank := proto.Clone(req).(*browserv1.ToolRequest)
	blank.GetTabNew().Url, blank.GetTabNew().Storage = "", ""
	if _, err := s.do(ctx, blank, w.pageOptions()); err != nil {
		return nil, err
	}
	open := &browserv1.ToolRequest{SessionId: req.GetSessionId(), SettleMs: req.SettleMs, SnapshotAfter: req.GetSnapshotAfter(), MaxChars: req.GetMaxChars(),
		Tool: &browserv1.ToolRequest_Open{Open: &browserv1.Open{Url: req.GetTabNew().GetUrl()}}}
	res, err := w.openRestoring(ctx, s, open, script)
	if err != nil {
		if _, cerr := s.closeTab(ctx, s.active, w.pageOptions()); cerr == nil {
			s.active = min(prev, len(s.tabs)-1)
		}
		return nil, err
	}
	msg := fmt.Sprintf("Opened tab %d (now active)", s.active)
	if c := res.GetContent(); len(c) > 0 && c[0].GetText() != "" {
		c[0].Part = &browserv1.Content_Text{Text: msg + ". " + c[0].GetText()}
	} else {
		page.AppendText(res, msg)
	}
	return startedFrom(res, nil, st)
}

// startedFrom adds to a successful open's result what it started from.
func startedFrom(res *browserv1.ToolResult, err error, st *savedStorage) (*browserv1.ToolResult, error) {
	if err != nil {
		return nil, err
	}
	page.AppendText(res, fmt.Sprintf("- started from saved storage %q: %s", st.Name, summarize(st).Line()))
	return res, nil
}
