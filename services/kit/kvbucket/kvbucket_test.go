package kvbucket_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func spec(history uint8) kvbucket.Spec {
	return kvbucket.Spec{
		Config: jetstream.KeyValueConfig{Bucket: "test_bucket", History: history, TTL: time.Hour},
		Keeps:  "the test keeps things",
	}
}

func history(t *testing.T, b *kvbucket.Bucket) int64 {
	t.Helper()
	st, err := b.KV().Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.History()
}

// TestOpen: Open creates the bucket, updates an existing one to its
// config, or with AsIs uses it as it is.
func TestOpen(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	b, err := kvbucket.Open(ctxT(t), nc, spec(1))
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "test_bucket" || history(t, b) != 1 {
		t.Fatalf("Open made %s with history %d, want test_bucket with 1", b.Name(), history(t, b))
	}
	asIs := spec(5)
	asIs.AsIs = true
	if b, err = kvbucket.Open(ctxT(t), nc, asIs); err != nil || history(t, b) != 1 {
		t.Fatalf("Open AsIs = %v, history %d; want the bucket as it was (1)", err, history(t, b))
	}
	if b, err = kvbucket.Open(ctxT(t), nc, spec(5)); err != nil || history(t, b) != 5 {
		t.Fatalf("Open = %v, history %d; want the bucket updated (5)", err, history(t, b))
	}
}

// TestDoReopens: an operation on a bucket that is gone (a NATS that lost
// its store) makes it again, tells the OnReopen hooks and succeeds; a
// key's state is not such a failure.
func TestDoReopens(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	b, err := kvbucket.Open(ctxT(t), nc, spec(1))
	if err != nil {
		t.Fatal(err)
	}
	reopened := 0
	remove := b.OnReopen(func() { reopened++ })
	err = b.Do(ctxT(t), func(kv jetstream.KeyValue) error { _, err := kv.Get(ctxT(t), "missing"); return err })
	if !errors.Is(err, jetstream.ErrKeyNotFound) || reopened != 0 {
		t.Fatalf("Do(get missing key) = %v, %d reopenings; want ErrKeyNotFound and none", err, reopened)
	}
	js, _ := jetstream.New(nc)
	if err := js.DeleteKeyValue(ctxT(t), "test_bucket"); err != nil {
		t.Fatal(err)
	}
	err = b.Do(ctxT(t), func(kv jetstream.KeyValue) error { _, err := kv.Put(ctxT(t), "k", []byte("v")); return err })
	if err != nil || reopened != 1 {
		t.Fatalf("Do(put) on a deleted bucket = %v, %d reopenings; want nil and 1", err, reopened)
	}
	if e, err := js.KeyValue(ctxT(t), "test_bucket"); err != nil {
		t.Fatalf("the bucket was not made again: %v", err)
	} else if v, err := e.Get(ctxT(t), "k"); err != nil || string(v.Value()) != "v" {
		t.Fatalf("Get(k) = %v; want the value put", err)
	}
	remove()
	if _, err := b.Reopen(ctxT(t)); err != nil || reopened != 1 {
		t.Fatalf("Reopen after remove = %v, %d reopenings; want the hook gone", err, reopened)
	}
}

// TestKeysAndEach: Keys lists the keys the stream holds (deleted ones
// too), Each the current entries.
func TestKeysAndEach(t *testing.T) {
	t.Parallel()
	nc := natstest.Conn(t, natstest.Server(t))
	b, err := kvbucket.Open(ctxT(t), nc, spec(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a.2", "a.1", "b.1"} {
		if _, err := b.KV().Put(ctxT(t), k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.KV().Delete(ctxT(t), "a.2"); err != nil {
		t.Fatal(err)
	}
	keys, last, err := b.Keys(ctxT(t), "a.*")
	if err != nil || !slices.Equal(keys, []string{"a.1", "a.2"}) || last != 4 {
		t.Errorf("Keys(a.*) = %q, %d, %v; want [a.1 a.2], 4", keys, last, err)
	}
	var got []string
	err = kvbucket.Each(ctxT(t), b.KV(), jetstream.AllKeys, func(e jetstream.KeyValueEntry) bool {
		got = append(got, e.Key())
		return true
	})
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"a.1", "b.1"}) {
		t.Errorf("Each = %q, %v; want [a.1 b.1]", got, err)
	}
	got = nil
	err = kvbucket.Each(ctxT(t), b.KV(), jetstream.AllKeys, func(e jetstream.KeyValueEntry) bool {
		got = append(got, e.Key())
		return false
	})
	if err != nil || len(got) != 1 {
		t.Errorf("Each stopping at once = %q, %v; want one key", got, err)
	}
}

// TestJetStreamOff: a server without JetStream gets an error that says
// what the bucket keeps and how to fix it.
func TestJetStreamOff(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{DontListen: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	_, err = kvbucket.Open(ctxT(t), nc, spec(1))
	if err == nil || !strings.Contains(err.Error(), "the test keeps things in a JetStream KV bucket") || !strings.Contains(err.Error(), "-js") {
		t.Fatalf("Open without JetStream = %v; want the error naming what the bucket keeps and -js", err)
	}
}
