package browser

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	browserv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/browser/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Import and export of saved storage (sov.browser.storage), for the
// gateway's admin API: an operator brings a login made elsewhere (a
// Playwright storageState file) into the fleet for one caller, or takes
// one out. Only workers hold the key that seals saved storage, so they
// answer; the gateway guards the routes (admin token, and export only
// with --storage-export).
//
// The same endpoint moves the saved storage of gateways before owner
// digests (storage.go) to its owner: "legacy" lists what is under a
// legacy scope, "move" re-seals one under its owner's scope, on the
// worker, so that no value leaves it.

// storageQueue is the queue group of sov.browser.storage.
const storageQueue = "sovereign-browser-storage"

// addStorageEndpoint serves sov.browser.storage when the worker keeps
// saved storage (it has the key); a fleet without such a worker answers
// "no responders".
func (w *Worker) addStorageEndpoint(c *bus.Conn, svc micro.Service) error {
	if w.storage == nil {
		return nil
	}
	return svc.AddEndpoint(browserbus.Storage.Name, bus.Handle(c, scrubbed(w, w.storageTransfer)),
		micro.WithEndpointSubject(browserbus.Storage.Subject(c)),
		micro.WithEndpointQueueGroup(storageQueue))
}

// storageState is Playwright's storageState shape.
type storageState struct {
	Cookies []*network.Cookie `json:"cookies"`
	Origins []stateOrigin     `json:"origins"`
}

type stateOrigin struct {
	Origin       string      `json:"origin"`
	LocalStorage []stateItem `json:"localStorage"`
}

type stateItem struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// storageTransfer answers sov.browser.storage.
func (w *Worker) storageTransfer(ctx context.Context, req *browserv1.StorageTransferRequest) (*browserv1.StorageTransferResponse, error) {
	if req.GetOp() == "legacy" {
		return w.legacyStorage(ctx)
	}
	owner, name := strings.TrimSpace(req.GetOwner()), req.GetName()
	if owner == "" {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "storage transfer names no owner (the digest of the caller's identity)")
	}
	if err := checkStorageName(name); err != nil {
		return nil, err
	}
	scope, err := callerScope(owner)
	if err != nil {
		return nil, err
	}
	key := scope + "." + name
	var st *savedStorage
	var out []byte
	switch req.GetOp() {
	case "import":
		var err error
		if st, err = parseState(name, req.GetStateJson()); err != nil {
			return nil, err
		}
		if err := w.putStorage(ctx, key, st, "import fewer cookies or origins"); err != nil {
			return nil, err
		}
		w.log.InfoContext(ctx, "storage imported", "cookies", len(st.Cookies), "origins", len(st.Storage))
	case "export":
		var err error
		if st, err = w.loadKey(ctx, key, name); err != nil {
			return nil, err
		}
		if out, err = json.Marshal(stateOf(st)); err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode the storage: %v", err)
		}
		w.log.WarnContext(ctx, "storage exported (it holds login state)", "cookies", len(st.Cookies), "origins", len(st.Storage))
	case "move":
		var err error
		if st, err = w.moveLegacy(ctx, req.GetFromScope(), key, name); err != nil {
			return nil, err
		}
	default:
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "storage transfer op must be import, export, move or legacy, not %q", clipName(req.GetOp()))
	}
	sum, err := json.Marshal(summarize(st))
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode the summary: %v", err)
	}
	return &browserv1.StorageTransferResponse{StateJson: out, SummaryJson: string(sum)}, nil
}

// legacyEntry is a saved storage under a legacy scope, as "legacy"
// lists it (summary_json: a JSON array of them).
type legacyEntry struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
}

// legacyStorage lists the saved storage under legacy scopes.
func (w *Worker) legacyStorage(ctx context.Context) (*browserv1.StorageTransferResponse, error) {
	lister, err := w.storage.ListKeys(ctx)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "list saved storage: %v", err)
	}
	list := []legacyEntry{}
	for k := range lister.Keys() {
		if scope, name, ok := legacyScope(k); ok {
			list = append(list, legacyEntry{Scope: scope, Name: name})
		}
	}
	out, err := json.Marshal(list)
	if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "encode the list: %v", err)
	}
	return &browserv1.StorageTransferResponse{SummaryJson: string(out)}, nil
}

// moveLegacy moves the saved storage name of the legacy scope from to
// key, re-sealed for key. It never overwrites: when the owner has a
// saved storage of that name already, the legacy one stays.
func (w *Worker) moveLegacy(ctx context.Context, from, key, name string) (*savedStorage, error) {
	old := from + "." + name
	if _, _, ok := legacyScope(old); !ok {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "from_scope %q is not a legacy scope (%d hex digits)", clipName(from), legacyScopeLen)
	}
	st, err := w.loadKey(ctx, old, name)
	if err != nil {
		return nil, err
	}
	sealed, err := w.sealStorage(key, st, "raise the worker's --max-storage-kb to move it")
	if err != nil {
		return nil, err
	}
	if _, err := w.storage.Create(ctx, key, sealed); errors.Is(err, jetstream.ErrKeyExists) {
		return nil, bus.Errorf(commonv1.ErrorCode_FAILED_PRECONDITION,
			"the owner has a saved storage %q already; the legacy one stays under scope %s (delete the owner's first to move it)", name, from)
	} else if err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "write the moved storage: %v", err)
	}
	if err := w.storage.Purge(ctx, old); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INTERNAL, "moved saved storage %q, but could not delete its legacy copy: %v", name, err)
	}
	w.log.InfoContext(ctx, "legacy saved storage moved to its owner", "scope", from, "storage", name)
	return st, nil
}

// parseState reads an imported storageState.
func parseState(name string, data []byte) (*savedStorage, error) {
	var in storageState
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "the storage is not a storageState JSON object ({\"cookies\": […], \"origins\": […]}): %v", err)
	}
	st := &savedStorage{Name: name, Time: time.Now().UTC()}
	for i, c := range in.Cookies {
		if c == nil || c.Name == "" || c.Domain == "" {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "cookie %d has no name or no domain", i)
		}
		if c.Path == "" {
			c.Path = "/"
		}
		c.Session = c.Expires <= 0
		st.Cookies = append(st.Cookies, c)
	}
	for _, o := range in.Origins {
		if !strings.HasPrefix(o.Origin, "http://") && !strings.HasPrefix(o.Origin, "https://") {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "origin %q is not an http(s) origin such as https://example.com", clipName(o.Origin))
		}
		os := originStorage{Origin: strings.TrimSuffix(o.Origin, "/")}
		for _, it := range o.LocalStorage {
			os.Items = append(os.Items, [2]string{it.Name, it.Value})
		}
		st.Storage = append(st.Storage, os)
	}
	return st, nil
}

// stateOf is st in Playwright's storageState shape.
func stateOf(st *savedStorage) storageState {
	out := storageState{Cookies: st.Cookies, Origins: []stateOrigin{}}
	if out.Cookies == nil {
		out.Cookies = []*network.Cookie{}
	}
	for _, o := range st.Storage {
		so := stateOrigin{Origin: o.Origin, LocalStorage: []stateItem{}}
		for _, it := range o.Items {
			so.LocalStorage = append(so.LocalStorage, stateItem{Name: it[0], Value: it[1]})
		}
		out.Origins = append(out.Origins, so)
	}
	return out
}
