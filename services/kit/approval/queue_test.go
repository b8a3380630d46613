package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

// replicas opens n queues on one NATS server, each on its own connection,
// as n gateway replicas do.
func replicas(t *testing.T, n int) (*natsrv.Server, []*approval.Queue) {
	t.Helper()
	srv := natstest.Server(t)
	var qs []*approval.Queue
	for range n {
		q, err := approval.Open(ctxT(t), natstest.Conn(t, srv), "sov")
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	return srv, qs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func request(tool string) approval.Request {
	return approval.Request{
		Tool: tool, Arguments: `{"script":"1+1"}`, Reason: `tool "` + tool + `" is monitored (global policy)`,
		Caller: "anonymous", Client: "test-client 1.0", Scope: "scope-digest", Grant: "tool:" + tool,
	}
}

// nextPending waits for the next pending request on a watch.
func nextPending(t *testing.T, ch <-chan approval.Request) approval.Request {
	t.Helper()
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended")
			}
			if r.State == approval.Pending {
				return r
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no pending request seen")
		}
	}
}

type result struct {
	r   approval.Request
	err error
}

func ask(q *approval.Queue, ctx context.Context, r approval.Request, e approval.Elicitor) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := q.Ask(ctx, r, e)
		ch <- result{r, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(15 * time.Second):
		t.Fatal("Ask did not return")
	}
	return result{}
}

func TestBucket(t *testing.T) {
	t.Parallel()
	for prefix, want := range map[string]string{"": "sov_approvals", "sov": "sov_approvals", "acme.sov": "acme_sov_approvals"} {
		if got := approval.Bucket(prefix); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", prefix, got, want)
		}
	}
}

// TestDecidedOnAnotherReplica: a request waiting on one replica is decided
// from another (the console's), and the session grant it makes holds on
// both.
func TestDecidedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 2)
	gw, console := qs[0], qs[1]
	ctx := ctxT(t)
	seen, err := console.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := gw.Granted(ctx, "scope-digest", "tool:eval"); ok || err != nil {
		t.Fatalf("granted before any decision: %v, %v", ok, err)
	}
	done := ask(gw, ctx, request("eval"), nil)
	p := nextPending(t, seen)
	if p.Tool != "eval" || p.Arguments != `{"script":"1+1"}` || p.ID == "" || p.Created.IsZero() ||
		p.Deadline.Sub(p.Created) != approval.DefaultTimeout {
		t.Fatalf("pending request as the console sees it: %+v", p)
	}
	if _, err := console.Decide(ctx, p.ID, true, approval.Session, "console:admin", "looks fine"); err != nil {
		t.Fatal(err)
	}
	res := wait(t, done)
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.r
	if r.State != approval.Approved || r.Decision != approval.Session || r.DecidedBy != "console:admin" || r.Note != "looks fine" ||
		r.DecidedAt.Before(r.Created) || r.ID != p.ID {
		t.Errorf("Ask returned %+v", r)
	}
	for i, q := range qs {
		g, ok, err := q.LookupGrant(ctx, "scope-digest", "tool:eval")
		if !ok || err != nil || g.DecidedBy != "console:admin" || g.RequestID != p.ID {
			t.Errorf("replica %d: grant %+v, %v, %v", i, g, ok, err)
		}
	}
	if ok, _ := gw.Granted(ctx, "scope-digest", "tool:click"); ok {
		t.Error("a grant for eval also grants click")
	}
	if ok, _ := gw.Granted(ctx, "other-scope", "tool:eval"); ok {
		t.Error("a grant holds in another browser session")
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 1)
	q := qs[0]
	ctx := ctxT(t)
	r := request("eval")
	r.Deadline = time.Now().Add(300 * time.Millisecond)
	start := time.Now()
	got, err := q.Ask(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.TimedOut || got.DecidedBy != approval.ByTimeout {
		t.Fatalf("after the deadline: %+v", got)
	}
	// Not before the deadline; and at it, not at the test context's end
	// (30 s), with room for a loaded machine.
	if took := time.Since(start); took < 250*time.Millisecond || took > 20*time.Second {
		t.Errorf("timed out after %s", took)
	}
	_, err = q.Decide(ctx, got.ID, true, approval.Once, "console:late", "")
	if !errors.Is(err, approval.ErrDecided) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("deciding a timed-out request: %v", err)
	}
}

func TestDecideTwice(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 2)
	ctx := ctxT(t)
	p, err := qs[0].Submit(ctx, request("eval"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qs[0].Decide(ctx, p.ID, true, "", "console:alice", ""); err != nil {
		t.Fatal(err)
	}
	cur, err := qs[1].Decide(ctx, p.ID, false, "", "console:bob", "")
	if !errors.Is(err, approval.ErrDecided) {
		t.Fatalf("second decision: %v", err)
	}
	for _, want := range []string{"approved once", "console:alice", p.ID} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if cur.State != approval.Approved || cur.DecidedBy != "console:alice" {
		t.Errorf("Decide returned %+v with the error", cur)
	}
	got, err := qs[1].Get(ctx, p.ID)
	if err != nil || got.State != approval.Approved || got.Decision != approval.Once || got.DecidedBy != "console:alice" {
		t.Errorf("after both decisions: %+v, %v", got, err)
	}
	if _, err := qs[0].Decide(ctx, "nosuchrequest", true, "", "console:alice", ""); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("deciding an unknown request: %v", err)
	}
	if _, err := qs[0].Get(ctx, "req.*"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("a key pattern as id: %v", err)
	}
	if _, err := qs[0].Decide(ctx, p.ID, true, "forever", "console:alice", ""); err == nil || !strings.Contains(err.Error(), "forever") {
		t.Errorf("an unknown scope: %v", err)
	}
	if _, err := qs[0].Decide(ctx, p.ID, true, "", "", ""); err == nil {
		t.Error("a decision without who decided was accepted")
	}
}

// TestSessionWithoutBinding: a call that opens a new browser session has
// nothing to grant for; approve-for-session approves it once.
func TestSessionWithoutBinding(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 1)
	ctx := ctxT(t)
	r := request("eval")
	r.Scope = ""
	p, err := qs[0].Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := qs[0].Decide(ctx, p.ID, true, approval.Session, "console:admin", "")
	if err != nil || got.State != approval.Approved || got.Decision != approval.Once {
		t.Errorf("approve for session without a session: %+v, %v", got, err)
	}
}

func TestGrant(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 2)
	ctx := ctxT(t)
	if ok, err := qs[0].Granted(ctx, "s1", "tool:eval"); ok || err != nil {
		t.Fatalf("granted before Grant: %v, %v", ok, err)
	}
	if err := qs[0].Grant(ctx, "s1", "tool:eval"); err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		if ok, err := q.Granted(ctx, "s1", "tool:eval"); !ok || err != nil {
			t.Errorf("replica %d: not granted after Grant: %v", i, err)
		}
		if ok, _ := q.Granted(ctx, "s2", "tool:eval"); ok {
			t.Errorf("replica %d: granted in another session", i)
		}
		if ok, _ := q.Granted(ctx, "", "tool:eval"); ok {
			t.Errorf("replica %d: granted without a session", i)
		}
	}
	if err := qs[0].Grant(ctx, "", "tool:eval"); err == nil {
		t.Error("a grant without a session was stored")
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 2)
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := qs[1].Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := qs[0].Submit(ctx, request("click"))
	if err != nil {
		t.Fatal(err)
	}
	if got := nextPending(t, ch); got.ID != p.ID || got.Tool != "click" {
		t.Fatalf("watch saw %+v, want %s", got, p.ID)
	}
	if _, err := qs[0].Decide(ctx, p.ID, false, "", "console:admin", "no clicking"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if got.ID != p.ID || got.State != approval.Denied || got.Note != "no clicking" {
			t.Errorf("watch saw %+v after the decision", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the decision was not watched")
	}
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 1)
	q := qs[0]
	ctx, cancel := context.WithCancel(ctxT(t))
	watch, err := q.Watch(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	done := ask(q, ctx, request("eval"), nil)
	p := nextPending(t, watch)
	cancel()
	res := wait(t, done)
	if !errors.Is(res.err, context.Canceled) {
		t.Errorf("Ask with its context cancelled: %v", res.err)
	}
	got, err := q.Get(ctxT(t), p.ID)
	if err != nil || got.State != approval.Denied || got.DecidedBy != approval.ByCancelled {
		t.Errorf("request of a cancelled call: %+v, %v", got, err)
	}
}

func TestElicitation(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 2)
	gw, console := qs[0], qs[1]
	ctx := ctxT(t)

	t.Run("approve", func(t *testing.T) {
		var shown approval.Request
		res := wait(t, ask(gw, ctx, request("eval"), func(_ context.Context, r approval.Request) (bool, approval.Scope, error) {
			shown = r
			return true, approval.Session, nil
		}))
		if res.err != nil || res.r.State != approval.Approved || res.r.Decision != approval.Session ||
			res.r.DecidedBy != "elicitation:test-client 1.0" {
			t.Fatalf("%+v, %v", res.r, res.err)
		}
		if shown.ID != res.r.ID || shown.Arguments != `{"script":"1+1"}` || shown.State != approval.Pending {
			t.Errorf("the elicitor was shown %+v", shown)
		}
	})
	t.Run("decline", func(t *testing.T) {
		res := wait(t, ask(gw, ctx, request("eval"), func(context.Context, approval.Request) (bool, approval.Scope, error) {
			return false, "", nil
		}))
		if res.err != nil || res.r.State != approval.Denied || res.r.DecidedBy != "elicitation:test-client 1.0" {
			t.Fatalf("%+v, %v", res.r, res.err)
		}
	})
	t.Run("unsupported, then the console", func(t *testing.T) {
		watch, err := console.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		failed := make(chan struct{})
		done := ask(gw, ctx, request("eval"), func(context.Context, approval.Request) (bool, approval.Scope, error) {
			defer close(failed)
			return false, "", errors.New("client has no elicitation")
		})
		p := nextPending(t, watch)
		select {
		case <-failed:
		case <-time.After(30 * time.Second):
			t.Fatal("the elicitor was not asked within 30 s")
		}
		time.Sleep(100 * time.Millisecond) // time passes: a decision wrongly taken on the failure would land
		if cur, _ := console.Get(ctx, p.ID); cur.State != approval.Pending {
			t.Fatalf("a failed elicitation decided the request: %+v", cur)
		}
		if _, err := console.Decide(ctx, p.ID, true, approval.Once, "console:admin", ""); err != nil {
			t.Fatal(err)
		}
		if res := wait(t, done); res.err != nil || res.r.State != approval.Approved || res.r.DecidedBy != "console:admin" {
			t.Fatalf("%+v, %v", res.r, res.err)
		}
	})
	t.Run("console first", func(t *testing.T) {
		watch, err := console.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan struct{})
		done := ask(gw, ctx, request("eval"), func(ctx context.Context, _ approval.Request) (bool, approval.Scope, error) {
			<-ctx.Done() // the user never answers the form
			close(stopped)
			return false, "", ctx.Err()
		})
		p := nextPending(t, watch)
		if _, err := console.Decide(ctx, p.ID, false, "", "console:admin", ""); err != nil {
			t.Fatal(err)
		}
		if res := wait(t, done); res.err != nil || res.r.State != approval.Denied || res.r.DecidedBy != "console:admin" {
			t.Fatalf("%+v, %v", res.r, res.err)
		}
		select {
		case <-stopped:
		case <-time.After(15 * time.Second):
			t.Error("the elicitation was not stopped when the console decided")
		}
	})
}

func TestConsume(t *testing.T) {
	t.Parallel()
	_, qs := replicas(t, 1)
	q := qs[0]
	ctx := ctxT(t)
	p, err := q.Submit(ctx, request("eval"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Consume(ctx, p.ID); err == nil {
		t.Error("a pending request was consumed")
	}
	if _, err := q.Decide(ctx, p.ID, true, approval.Once, "elicitation:c", ""); err != nil {
		t.Fatal(err)
	}
	if got, err := q.Consume(ctx, p.ID); err != nil || got.Consumed.IsZero() {
		t.Fatalf("consume an approved request: %+v, %v", got, err)
	}
	if _, err := q.Consume(ctx, p.ID); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("second consume: %v", err)
	}
}

// TestList: pending oldest first, then decided in the last hour newest
// first; a request pending past its deadline (no call waits for it) is
// timed out by the listing, and older decisions are left out.
func TestList(t *testing.T) {
	t.Parallel()
	srv, qs := replicas(t, 1)
	q := qs[0]
	ctx := ctxT(t)
	var ids []string
	for _, tool := range []string{"eval", "click", "fill", "type"} {
		p, err := q.Submit(ctx, request(tool))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
		time.Sleep(5 * time.Millisecond) // time passes: the requests' times differ, so their order is known
	}
	if _, err := q.Decide(ctx, ids[1], true, "", "console:a", ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // time passes: the decisions' times differ
	if _, err := q.Decide(ctx, ids[3], false, "", "console:a", ""); err != nil {
		t.Fatal(err)
	}
	// Written as another replica would have: one decided long ago, one
	// whose deadline passed while nobody waited.
	kv, err := jetstream.New(natstest.Conn(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := kv.KeyValue(ctx, approval.Bucket("sov"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(r approval.Request) {
		b, _ := json.Marshal(r)
		if _, err := bucket.Put(ctx, "req."+r.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	put(approval.Request{ID: "old", Tool: "eval", Created: old, Deadline: old.Add(time.Minute), State: approval.Denied,
		DecidedBy: "console:a", DecidedAt: old})
	put(approval.Request{ID: "stale", Tool: "eval", Created: time.Now().Add(-10 * time.Minute), Deadline: time.Now().Add(-8 * time.Minute),
		State: approval.Pending})

	list, err := q.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range list {
		got = append(got, r.ID)
	}
	// stale was decided (timed out) by this listing: the newest decision.
	want := []string{ids[0], ids[2], "stale", ids[3], ids[1]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if s := list[2]; s.State != approval.TimedOut || s.DecidedBy != approval.ByTimeout {
		t.Errorf("stale request listed as %+v", s)
	}
}
