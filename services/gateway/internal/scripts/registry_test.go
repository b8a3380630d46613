package scripts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// wait is how long a test waits for something that takes moments; it
// only bounds a failing test.
const wait = 20 * time.Second

const (
	searchJS = `function describe(){ return [{name: "search", description: "Search"}, {name: "create"}] }
function search(a){ return "found " + a.q } function create(a){ return "created" }`
	searchJS2 = `function describe(){ return [{name: "search", description: "Search v2"}, {name: "close"}] }
function call(name, a){ return name + " v2" }`
	brokenJS = `function describe(){ return {name: "x", inputSchema: {type: "array"}} } function x(){}`
)

// changes records the OnChange calls of a registry.
type changes chan Change

func (c changes) onChange(added, removed []Tool) { c <- Change{Added: added, Removed: removed} }

// next waits for the next change.
func (c changes) next(t *testing.T) Change {
	t.Helper()
	select {
	case ch := <-c:
		return ch
	case <-time.After(wait):
		t.Fatalf("no OnChange within %s", wait)
		return Change{}
	}
}

func names(tools []Tool) string {
	var n []string
	for _, t := range tools {
		n = append(n, t.Name)
	}
	return strings.Join(n, ",")
}

func TestStore(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	st, err := OpenStore(ctx, natstest.Conn(t, srv), "test.fleet")
	if err != nil {
		t.Fatal(err)
	}
	if st.BucketName() != "test_fleet_scripts" {
		t.Errorf("bucket = %s", st.BucketName())
	}
	if Bucket("") != "sov_scripts" {
		t.Errorf("default bucket = %s", Bucket(""))
	}
	if _, err := st.Put(ctx, "jira", []byte(searchJS)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "Jira", []byte(searchJS)); err == nil || !strings.Contains(err.Error(), "bad script name") {
		t.Errorf("Put(Jira) = %v, want a bad name error", err)
	}
	if _, err := st.Put(ctx, "big", make([]byte, MaxSource+1)); err == nil || !strings.Contains(err.Error(), "over the 256 KiB limit") {
		t.Errorf("Put(big) = %v, want the size error", err)
	}
	e, err := st.Get(ctx, "jira")
	if err != nil || string(e.Source) != searchJS || e.Revision == 0 {
		t.Fatalf("Get = %+v, %v", e, err)
	}
	if _, err := st.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(nope) = %v, want ErrNotFound", err)
	}
	if _, err := st.Put(ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 2 || list[0].Stem != "jira" || list[1].Stem != "other" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := st.Delete(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete twice = %v, want ErrNotFound", err)
	}
	if list, err := st.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("List after delete = %+v, %v", list, err)
	}
}

func TestRegistryAcrossGateways(t *testing.T) {
	srv := natstest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	builtin := map[string]bool{"open": true, "sovereign__reload": true}

	// Two gateways, each with its own connection, store and registry.
	var regs [2]*Registry
	var chs [2]changes
	var stores [2]*Store
	for i := range regs {
		st, err := OpenStore(ctx, natstest.Conn(t, srv), "")
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
		chs[i] = make(changes, 16)
		regs[i] = NewRegistry(st, RegistryOptions{Builtin: builtin, OnChange: chs[i].onChange})
		if _, err := regs[i].Reload(ctx, ""); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = regs[i].Watch(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	a, b := regs[0], regs[1]

	// A put on gateway A reaches gateway B's OnChange.
	if _, err := stores[0].Put(ctx, "jira", []byte(searchJS)); err != nil {
		t.Fatal(err)
	}
	ch := chs[1].next(t)
	if names(ch.Added) != "jira__create,jira__search" || len(ch.Removed) != 0 {
		t.Fatalf("B's change = %+v", ch)
	}
	if got := names(b.Tools()); got != "jira__create,jira__search" {
		t.Fatalf("B serves %s", got)
	}
	res, isErr, err := b.Call(ctx, "jira__search", map[string]any{"q": "bug"}, nil)
	if err != nil || isErr || res != "found bug" {
		t.Fatalf("B call = %q, %v, %v", res, isErr, err)
	}
	if ch := chs[0].next(t); names(ch.Added) != "jira__create,jira__search" {
		t.Fatalf("A's change = %+v", ch)
	}

	// A new version: a changed description, a tool gone, a tool new.
	if _, err := stores[0].Put(ctx, "jira", []byte(searchJS2)); err != nil {
		t.Fatal(err)
	}
	ch = chs[1].next(t)
	if names(ch.Added) != "jira__close,jira__search" || names(ch.Removed) != "jira__create" {
		t.Fatalf("B's change after the update = %+v", ch)
	}
	if res, _, _ := b.Call(ctx, "jira__search", nil, nil); res != "search v2" {
		t.Fatalf("B runs the old version: %q", res)
	}
	chs[0].next(t)

	// A script that does not load is reported, with its reason, and
	// serves nothing; the others stay.
	if _, err := stores[1].Put(ctx, "broken", []byte(brokenJS)); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, wait, func() error { return kittest.Check(a.Errors()["broken"] != "", "A reports no error for broken") })
	if why := a.Errors()["broken"]; !strings.Contains(why, "a schema that is not an object") {
		t.Fatalf("A's error for broken = %q", why)
	}
	if got := names(a.Tools()); got != "jira__close,jira__search" {
		t.Fatalf("A serves %s", got)
	}
	info := a.Scripts()
	if len(info) != 2 || info[0].Stem != "broken" || info[0].Error == "" || len(info[0].Tools) != 0 || info[1].Stem != "jira" || len(info[1].Tools) != 2 {
		t.Fatalf("A's scripts = %+v", info)
	}

	// Precedence: a script tool named like a built-in is not served.
	if _, err := stores[0].Put(ctx, "sovereign", []byte(`function describe(){ return [{name: "reload"}, {name: "status"}] } function call(n){ return n }`)); err != nil {
		t.Fatal(err)
	}
	ch = chs[1].next(t)
	if names(ch.Added) != "sovereign__status" {
		t.Fatalf("B's change with a clash = %+v", ch)
	}
	if why := b.Errors()["sovereign"]; !strings.Contains(why, "sovereign__reload clashes with a built-in tool") {
		t.Fatalf("B's clash error = %q", why)
	}
	if _, ok := b.Lookup("sovereign__reload"); ok {
		t.Fatal("the clashing tool is served")
	}
	if _, _, err := b.Call(ctx, "sovereign__reload", nil, nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("calling the clashing tool: %v", err)
	}
	chs[0].next(t)

	// Delete: the tools go everywhere.
	if err := stores[1].Delete(ctx, "jira"); err != nil {
		t.Fatal(err)
	}
	ch = chs[0].next(t)
	if names(ch.Removed) != "jira__close,jira__search" || len(ch.Added) != 0 {
		t.Fatalf("A's change after delete = %+v", ch)
	}
	chs[1].next(t)
	if got := names(a.Tools()); got != "sovereign__status" {
		t.Fatalf("A serves %s after delete", got)
	}

	// A reload of an unchanged bucket changes nothing.
	if ch, err := a.Reload(ctx, ""); err != nil || len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("Reload = %+v, %v", ch, err)
	}
}

func TestReloadKeepsOldSet(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	nc := natstest.Conn(t, srv)
	st, err := OpenStore(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "jira", []byte(searchJS)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "web", []byte(`function describe(){ return {name: "go"} } function go(){ return "went" }`)); err != nil {
		t.Fatal(err)
	}
	ch := make(changes, 16)
	r := NewRegistry(st, RegistryOptions{OnChange: ch.onChange})
	if c, err := r.Reload(ctx, ""); err != nil || names(c.Added) != "jira__create,jira__search,web__go" {
		t.Fatalf("Reload = %+v, %v", c, err)
	}
	<-ch
	if len(r.Tools()) != 3 {
		t.Fatalf("served %s after the first reload", names(r.Tools()))
	}

	// Reload one stem.
	if _, err := st.Put(ctx, "web", []byte(`function describe(){ return {name: "run"} } function run(){ return "ran" }`)); err != nil {
		t.Fatal(err)
	}
	if c, err := r.Reload(ctx, "web"); err != nil || names(c.Added) != "web__run" || names(c.Removed) != "web__go" {
		t.Fatalf("Reload(web) = %+v, %v", c, err)
	}
	<-ch
	want := names(r.Tools())
	if _, err := r.Reload(ctx, "Bad"); err == nil {
		t.Error("Reload(Bad) accepted a bad stem")
	}

	// The bucket is gone: the old set stays and Reload says why.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, st.BucketName()); err != nil {
		t.Fatal(err)
	}
	for _, stem := range []string{"", "jira"} {
		c, err := r.Reload(ctx, stem)
		if err == nil || !strings.Contains(err.Error(), "the scripts loaded before are still served") {
			t.Fatalf("Reload(%q) without a bucket = %+v, %v; want an error", stem, c, err)
		}
		if got := names(r.Tools()); got != want {
			t.Fatalf("after a failed reload the registry serves %s, want %s", got, want)
		}
	}
	if res, _, err := r.Call(ctx, "web__run", nil, nil); err != nil || res != "ran" {
		t.Fatalf("Call after a failed reload = %q, %v", res, err)
	}
	// A Put brings the bucket back.
	if _, err := st.Put(ctx, "web", []byte(`function describe(){ return {name: "run"} } function run(){ return "ran" }`)); err != nil {
		t.Fatalf("Put after the bucket was deleted: %v", err)
	}

	// NATS is unreachable: the same.
	srv.Stop()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := r.Reload(rctx, ""); err == nil {
		t.Fatal("Reload with NATS down succeeded")
	}
	if got := names(r.Tools()); got != want {
		t.Fatalf("with NATS down the registry serves %s, want %s", got, want)
	}
	select {
	case c := <-ch:
		t.Fatalf("OnChange(%+v) after failed reloads", c)
	default:
	}
}

func TestSeedDir(t *testing.T) {
	srv := natstest.Server(t)
	ctx := context.Background()
	st, err := OpenStore(ctx, natstest.Conn(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("jira.js", searchJS)
	write("broken.js", brokenJS)
	write("Bad-Name.js", searchJS)
	write("huge.js", strings.Repeat("/", MaxSource+1))
	write("notes.txt", "not a script")
	if err := os.Mkdir(filepath.Join(dir, "sub.js"), 0o755); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	r := NewRegistry(st, RegistryOptions{Options: Options{Log: log}})
	rep, err := r.SeedDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Added, ",") != "broken,jira" || len(rep.Updated)+len(rep.Unchanged) != 0 || len(rep.Failed) != 2 ||
		!strings.Contains(rep.Failed["Bad-Name.js"], "bad script name") || !strings.Contains(rep.Failed["huge.js"], "over the 256 KiB limit") {
		t.Fatalf("SeedDir = %+v", rep)
	}
	var seeded bool
	for _, l := range logs.lines() {
		if l["msg"] == "seeded scripts" {
			seeded = true
		}
	}
	if !seeded {
		t.Error("SeedDir logged nothing")
	}
	if _, err := r.Reload(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := names(r.Tools()); got != "jira__create,jira__search" {
		t.Fatalf("serves %s", got)
	}
	errs := r.Errors()
	var keys []string
	for k := range errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "Bad-Name.js,broken,huge.js" || !strings.Contains(errs["broken"], "a schema that is not an object") {
		t.Fatalf("Errors = %v", errs)
	}

	// Seeding again: unchanged files are left alone, changed ones updated.
	write("jira.js", searchJS2)
	rep, err = r.SeedDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Updated, ",") != "jira" || strings.Join(rep.Unchanged, ",") != "broken" || len(rep.Added) != 0 {
		t.Fatalf("second SeedDir = %+v", rep)
	}
	if e, _ := st.Get(ctx, "jira"); string(e.Source) != searchJS2 {
		t.Fatalf("stored %q", e.Source)
	}
	if _, err := r.SeedDir(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Error("SeedDir of a missing directory succeeded")
	}
}

func TestValidate(t *testing.T) {
	r := NewRegistry(nil, RegistryOptions{Builtin: map[string]bool{"sovereign__reload": true}})
	if s, err := r.Validate("jira", []byte(searchJS)); err != nil || len(s.Tools) != 2 {
		t.Fatalf("Validate(good) = %v, %v", s, err)
	}
	if _, err := r.Validate("sovereign", []byte(`function describe(){ return {name: "reload"} } function reload(){}`)); err == nil ||
		!strings.Contains(err.Error(), "clashes with a built-in tool") {
		t.Fatalf("Validate(clash) = %v", err)
	}
	if _, err := r.Validate("broken", []byte(brokenJS)); err == nil || !strings.Contains(err.Error(), "a schema that is not an object") {
		t.Fatalf("Validate(broken) = %v", err)
	}
}

func TestWatchBucketGone(t *testing.T) {
	srv := natstest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	nc := natstest.Conn(t, srv)
	admin, err := OpenStore(ctx, nc, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(ctx, natstest.Conn(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	ch := make(changes, 16)
	r := NewRegistry(st, RegistryOptions{Options: Options{Log: log}, OnChange: ch.onChange})
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Watch(ctx) }()
	defer func() { cancel(); <-done }()

	if _, err := admin.Put(ctx, "jira", []byte(searchJS)); err != nil {
		t.Fatal(err)
	}
	if c := ch.next(t); names(c.Added) != "jira__create,jira__search" {
		t.Fatalf("change = %+v", c)
	}

	// The bucket is deleted: the watch notices, and the tools stay.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, admin.BucketName()); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, wait, func() error {
		for _, l := range logs.lines() {
			if l["msg"] == "script watch ended; serving the scripts loaded before and retrying" {
				return nil
			}
		}
		return errors.New("the registry has not logged the end of its watch")
	})
	if got := names(r.Tools()); got != "jira__create,jira__search" {
		t.Fatalf("without a bucket the registry serves %q", got)
	}

	// A Put makes the bucket again; the watch follows the new one, whose
	// content is the truth.
	if _, err := admin.Put(ctx, "web", []byte(`function describe(){ return {name: "go"} } function go(){}`)); err != nil {
		t.Fatal(err)
	}
	if c := ch.next(t); names(c.Added) != "web__go" || names(c.Removed) != "jira__create,jira__search" {
		t.Fatalf("change after the bucket came back = %+v", c)
	}
}
