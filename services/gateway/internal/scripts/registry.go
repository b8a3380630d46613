package scripts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Upkeep of the watch: how often it checks for a NATS reconnect and for a
// bucket deleted or made again, how often
// it re-reads the whole bucket anyway, and its longest retry pause.
const (
	reconnectPoll = time.Second
	resyncEvery   = time.Minute
	maxBackoff    = 5 * time.Second
)

// RegistryOptions configure a [Registry].
type RegistryOptions struct {
	// Options are the scripts' limits and logger.
	Options
	// Builtin names the tools that come before scripts (the gateway's
	// built-in tools): a script tool of such a name is not served and is
	// reported as a load error of its script. A script never shadows a
	// built-in.
	Builtin map[string]bool
	// OnChange, if set, is called after every change of the served tools:
	// added are new tools and tools whose declaration changed (register
	// them again), removed are tools no longer served. Calls are
	// sequential, in the order of the changes.
	OnChange func(added, removed []Tool)
}

// Registry is the set of script tools a gateway serves, loaded from a
// [Store], with the load errors of the scripts that did not load. It is
// safe for concurrent use.
type Registry struct {
	store *Store
	opts  RegistryOptions
	log   *slog.Logger

	applyMu sync.Mutex // one change at a time, OnChange in order

	mu       sync.RWMutex
	entries  map[string]*entry  // by stem
	served   map[string]*Script // by tool name
	tools    []Tool             // served, sorted by name
	clashes  map[string]string  // by stem: why some of its tools are not served
	seedErrs map[string]string  // by file name: files SeedDir could not store
}

// entry is a stored script and what became of it.
type entry struct {
	rev    uint64
	sum    [32]byte
	script *Script // nil when it did not load
	err    string  // why it did not load
}

// Change is what a reload changed in the served tools.
type Change struct {
	Added   []Tool `json:"added"`
	Removed []Tool `json:"removed"`
}

// NewRegistry makes an empty registry of store's scripts: call Reload to
// load them and Watch to follow the bucket.
func NewRegistry(store *Store, o RegistryOptions) *Registry {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &Registry{
		store: store, opts: o, log: log.With("component", "scripts"),
		entries: map[string]*entry{}, served: map[string]*Script{},
		clashes: map[string]string{}, seedErrs: map[string]string{},
	}
}

// Tools are the served script tools, sorted by name.
func (r *Registry) Tools() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.tools)
}

// Lookup finds a served tool.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	s := r.served[name]
	r.mu.RUnlock()
	if s == nil {
		return Tool{}, false
	}
	for _, t := range s.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Call runs a served script tool (see [Script.Call]); ErrUnknownTool if no
// script serves it.
func (r *Registry) Call(ctx context.Context, tool string, args map[string]any, host Host) (string, bool, error) {
	r.mu.RLock()
	s := r.served[tool]
	r.mu.RUnlock()
	if s == nil {
		return "", false, fmt.Errorf("%w %q", ErrUnknownTool, tool)
	}
	return s.Call(ctx, tool, args, host)
}

// Errors are the problems of the scripts, by stem: scripts that did not
// load, and loaded scripts some of whose tools are not served (a clash
// with a built-in tool). Files SeedDir could not store are reported by
// file name ("Bad-Name.js").
func (r *Registry) Errors() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := maps.Clone(r.seedErrs)
	for stem, e := range r.entries {
		if e.err != "" {
			out[stem] = e.err
		}
	}
	for stem, why := range r.clashes {
		out[stem] = why
	}
	return out
}

// ScriptInfo describes a stored script for listings.
type ScriptInfo struct {
	Stem     string   `json:"stem"`
	Revision uint64   `json:"revision"`
	Tools    []string `json:"tools"`           // served
	Error    string   `json:"error,omitempty"` // why it (or some of its tools) is not served
}

// Scripts lists the stored scripts, by stem, with their served tools and
// their problems.
func (r *Registry) Scripts() []ScriptInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []ScriptInfo
	for _, stem := range slices.Sorted(maps.Keys(r.entries)) {
		e := r.entries[stem]
		info := ScriptInfo{Stem: stem, Revision: e.rev, Error: e.err, Tools: []string{}}
		if why := r.clashes[stem]; why != "" {
			info.Error = why
		}
		if e.script != nil {
			for _, t := range e.script.Tools {
				if r.served[t.Name] == e.script {
					info.Tools = append(info.Tools, t.Name)
				}
			}
		}
		out = append(out, info)
	}
	return out
}

// Validate loads a script without storing it (for an admin "validate"):
// the load errors of [Load], and tools that would clash with built-ins.
func (r *Registry) Validate(stem string, src []byte) (*Script, error) {
	s, err := r.opts.Options.Load(stem, src)
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, t := range s.Tools {
		if r.opts.Builtin[t.Name] {
			reasons = append(reasons, fmt.Sprintf("declaration %q: tool %s clashes with a built-in tool (built-ins come first)", t.Short, t.Name))
		}
	}
	if len(reasons) > 0 {
		return nil, &LoadError{Stem: stem, Reasons: reasons}
	}
	return s, nil
}

// Reload re-reads the scripts from the bucket: all of them, or the one of
// stem. If the bucket cannot be read, the served set stays as it was and
// Reload returns the error.
func (r *Registry) Reload(ctx context.Context, stem string) (Change, error) {
	if stem != "" {
		if err := checkStem(stem); err != nil {
			return Change{}, err
		}
		e, err := r.store.Get(ctx, stem)
		if errors.Is(err, ErrNotFound) {
			return r.apply(func(m map[string]*entry) { delete(m, stem) }), nil
		}
		if err != nil {
			r.log.Error("script reload failed; serving the scripts loaded before", "script", stem, "err", err)
			return Change{}, fmt.Errorf("reload script %q: %w (the scripts loaded before are still served)", stem, err)
		}
		ent := r.load(e)
		return r.apply(func(m map[string]*entry) { keepNewer(m, stem, ent) }), nil
	}
	list, last, err := r.store.list(ctx)
	if err != nil {
		r.log.Error("script reload failed; serving the scripts loaded before", "err", err)
		return Change{}, fmt.Errorf("reload scripts: %w (the scripts loaded before are still served)", err)
	}
	fresh := make(map[string]*entry, len(list))
	for _, e := range list {
		fresh[e.Stem] = r.load(e)
	}
	return r.apply(func(m map[string]*entry) {
		for stem, cur := range m {
			// Gone from the bucket, unless the watch brought a newer
			// revision meanwhile.
			if fresh[stem] == nil && cur.rev <= last {
				delete(m, stem)
			}
		}
		for stem, ent := range fresh {
			keepNewer(m, stem, ent)
		}
	}), nil
}

// keepNewer puts ent in m unless m has a newer revision of stem.
func keepNewer(m map[string]*entry, stem string, ent *entry) {
	if cur := m[stem]; cur == nil || cur.rev <= ent.rev {
		m[stem] = ent
	}
}

// load loads a stored script, reusing the loaded one if its source did
// not change.
func (r *Registry) load(e Entry) *entry {
	sum := sha256.Sum256(e.Source)
	r.mu.RLock()
	old := r.entries[e.Stem]
	r.mu.RUnlock()
	if old != nil && old.sum == sum {
		return &entry{rev: e.Revision, sum: sum, script: old.script, err: old.err}
	}
	s, err := r.opts.Options.Load(e.Stem, e.Source)
	if err != nil {
		r.log.Warn("script did not load; its tools are not served", "script", e.Stem, "revision", e.Revision, "reason", err.Error())
		return &entry{rev: e.Revision, sum: sum, err: err.Error()}
	}
	names := make([]string, len(s.Tools))
	for i, t := range s.Tools {
		names[i] = t.Name
	}
	r.log.Info("script loaded", "script", e.Stem, "revision", e.Revision, "tools", names)
	return &entry{rev: e.Revision, sum: sum, script: s}
}

// apply changes the entries with edit, recomputes the served tools and
// reports the change to OnChange.
func (r *Registry) apply(edit func(map[string]*entry)) Change {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()

	r.mu.Lock()
	edit(r.entries)
	served := map[string]*Script{}
	clashes := map[string]string{}
	for _, stem := range slices.Sorted(maps.Keys(r.entries)) {
		s := r.entries[stem].script
		if s == nil {
			continue
		}
		var notes []string
		for _, t := range s.Tools {
			switch other := served[t.Name]; {
			case r.opts.Builtin[t.Name]:
				notes = append(notes, fmt.Sprintf("tool %s clashes with a built-in tool and is not served (built-ins come first)", t.Name))
			case other != nil:
				notes = append(notes, fmt.Sprintf("tool %s is already served by script %q and is not served", t.Name, other.Stem))
			default:
				served[t.Name] = s
			}
		}
		if len(notes) > 0 {
			clashes[stem] = fmt.Sprintf("script %q: %s", stem, strings.Join(notes, "; "))
		}
	}
	var tools []Tool
	for _, name := range slices.Sorted(maps.Keys(served)) {
		for _, t := range served[name].Tools {
			if t.Name == name {
				tools = append(tools, t)
			}
		}
	}
	before := r.tools
	r.served, r.tools = served, tools
	for stem, why := range clashes {
		if r.clashes[stem] != why {
			r.log.Warn("script tools not served", "script", stem, "reason", why)
		}
	}
	r.clashes = clashes
	r.mu.Unlock()

	ch := diff(before, tools)
	if len(ch.Added)+len(ch.Removed) > 0 && r.opts.OnChange != nil {
		r.opts.OnChange(ch.Added, ch.Removed)
	}
	return ch
}

// diff is what changed from before to after.
func diff(before, after []Tool) Change {
	old := map[string]Tool{}
	for _, t := range before {
		old[t.Name] = t
	}
	var ch Change
	for _, t := range after {
		if o, ok := old[t.Name]; !ok || !o.same(t) {
			ch.Added = append(ch.Added, t)
		}
		delete(old, t.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		ch.Removed = append(ch.Removed, old[name])
	}
	return ch
}

// Watch follows the bucket until ctx ends, applying every change (so
// OnChange fires on every gateway within moments of a Put or Delete). It
// restarts its watch after a NATS reconnect or when the watch ends, and
// re-reads the whole bucket every minute; while the bucket cannot be
// read, the scripts loaded before stay served. It returns ctx's error.
func (r *Registry) Watch(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := r.follow(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > maxBackoff {
			backoff = 100 * time.Millisecond // it had been working
		}
		r.log.Warn("script watch ended; serving the scripts loaded before and retrying", "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
	return ctx.Err()
}

// follow runs one watch: it applies the initial values as a whole, then
// each update, until the watch must be renewed.
func (r *Registry) follow(ctx context.Context) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	born, err := r.store.incarnation(ctx)
	if err != nil {
		return err
	}
	w, err := r.store.watch(wctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	poll := time.NewTicker(reconnectPoll)
	defer poll.Stop()
	resync := time.NewTicker(resyncEvery)
	defer resync.Stop()
	reconnects := r.store.b.Conn().Stats().Reconnects

	initial := map[string]*entry{}
	var last uint64 // the newest revision among the initial values
	loading := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
			if n := r.store.b.Conn().Stats().Reconnects; n != reconnects {
				return errors.New("NATS reconnected")
			}
			if now, err := r.store.incarnation(ctx); err != nil || !now.Equal(born) {
				return fmt.Errorf("the bucket was deleted or made again (%v)", err)
			}
		case <-resync.C:
			if !loading {
				_, _ = r.Reload(ctx, "") // logs its own failure
			}
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("the watch ended")
			case e == nil && loading:
				loading = false
				r.apply(func(m map[string]*entry) {
					for stem, cur := range m {
						if initial[stem] == nil && cur.rev <= last {
							delete(m, stem)
						}
					}
					for stem, ent := range initial {
						keepNewer(m, stem, ent)
					}
				})
			case e == nil:
			case loading:
				last = max(last, e.Revision())
				if e.Operation() == jetstream.KeyValuePut {
					initial[e.Key()] = r.load(entryOf(e))
				}
			default:
				r.update(e)
			}
		}
	}
}

// update applies one change of the bucket, unless a newer revision of
// that script is already loaded.
func (r *Registry) update(e jetstream.KeyValueEntry) {
	stem := e.Key()
	r.mu.RLock()
	old := r.entries[stem]
	r.mu.RUnlock()
	if old != nil && old.rev >= e.Revision() {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		if old != nil {
			r.log.Info("script deleted", "script", stem, "revision", e.Revision())
			r.apply(func(m map[string]*entry) { delete(m, stem) })
		}
		return
	}
	ent := r.load(entryOf(e))
	r.apply(func(m map[string]*entry) { keepNewer(m, stem, ent) })
}

// SeedReport is what SeedDir did, by stem (file name for Failed).
type SeedReport struct {
	Added     []string          `json:"added"`
	Updated   []string          `json:"updated"`
	Unchanged []string          `json:"unchanged"`
	Failed    map[string]string `json:"failed,omitempty"`
}

// SeedDir puts every *.js file of dir (SOVEREIGN_TOOLS_DIR) into the
// bucket under its stem, unless the bucket already holds the same source.
// It neither loads the scripts (the registry reports those that do not
// load) nor deletes stored scripts that have no file. Files it cannot
// store (a bad stem, too large, unreadable) are logged and reported in
// Errors by file name. The error is for a directory it cannot read or a
// bucket it cannot write.
func (r *Registry) SeedDir(ctx context.Context, dir string) (SeedReport, error) {
	rep := SeedReport{Failed: map[string]string{}}
	files, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("seed scripts: %w", err)
	}
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || filepath.Ext(name) != ".js" {
			continue
		}
		stem := strings.TrimSuffix(name, ".js")
		src, err := readSource(filepath.Join(dir, name))
		if err == nil {
			err = checkStem(stem)
		}
		if err != nil {
			rep.Failed[name] = err.Error()
			r.log.Error("script file not seeded", "file", filepath.Join(dir, name), "reason", err.Error())
			continue
		}
		old, err := r.store.Get(ctx, stem)
		switch {
		case err == nil && string(old.Source) == string(src):
			rep.Unchanged = append(rep.Unchanged, stem)
			continue
		case err != nil && !errors.Is(err, ErrNotFound):
			return rep, fmt.Errorf("seed scripts: %w", err)
		}
		if _, err := r.store.Put(ctx, stem, src); err != nil {
			return rep, fmt.Errorf("seed scripts: %w", err)
		}
		if old.Stem == "" {
			rep.Added = append(rep.Added, stem)
		} else {
			rep.Updated = append(rep.Updated, stem)
		}
	}
	r.log.Info("seeded scripts", "dir", dir, "added", rep.Added, "updated", rep.Updated,
		"unchanged", rep.Unchanged, "failed", len(rep.Failed))
	r.mu.Lock()
	r.seedErrs = map[string]string{}
	for name, why := range rep.Failed {
		r.seedErrs[name] = "file " + name + " was not seeded: " + why
	}
	r.mu.Unlock()
	return rep, nil
}

// readSource reads a script file, at most MaxSource bytes.
func readSource(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > MaxSource {
		return nil, fmt.Errorf("the file is %d bytes, over the %d KiB limit", st.Size(), MaxSource>>10)
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
