// Package kvbucket opens a JetStream KV bucket, and opens it again when it is lost.
package kvbucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Spec says which bucket to open and how.
type Spec struct {
	// Config is the bucket's configuration. On file storage (the zero
	// value) with Replicas 0, the fleet's replica count
	// (SOVEREIGN_NATS_REPLICAS) is used.
	Config jetstream.KeyValueConfig
	// Keeps says what the bucket holds ("the agent keeps its runs"), for
	// the error of a NATS server without JetStream, which tells the
	// operator how to fix it.
	Keeps string
	// AsIs uses an existing bucket as it is; otherwise it is updated to
	// Config.
	AsIs bool
	// ReplaceMemory deletes a bucket found on memory storage (left by an
	// older version) when Config cannot be applied to it, and creates it
	// anew: for buckets whose content a NATS restart may lose anyway.
	ReplaceMemory bool
}

// Bucket is an open KV bucket. Its methods are safe for concurrent use.
type Bucket struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	spec Spec

	mu    sync.Mutex
	kv    jetstream.KeyValue
	hooks map[int]func() // see OnReopen
	next  int
}

// Open opens the bucket spec describes, creating it when it is missing.
func Open(ctx context.Context, nc *nats.Conn, spec Spec) (*Bucket, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if spec.Config.Storage == jetstream.FileStorage && spec.Config.Replicas == 0 {
		spec.Config.Replicas = config.JetStreamReplicas()
	}
	b := &Bucket{nc: nc, js: js, spec: spec}
	if err := b.open(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// OpenKV is Open for a caller that needs the KeyValue only.
func OpenKV(ctx context.Context, nc *nats.Conn, spec Spec) (jetstream.KeyValue, error) {
	b, err := Open(ctx, nc, spec)
	if err != nil {
		return nil, err
	}
	return b.KV(), nil
}

func (b *Bucket) open(ctx context.Context) error {
	cfg := b.spec.Config
	var kv jetstream.KeyValue
	var err error
	if b.spec.AsIs {
		kv, err = b.js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = b.js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				kv, err = b.js.KeyValue(ctx, cfg.Bucket)
			}
		}
	} else {
		kv, err = b.js.CreateOrUpdateKeyValue(ctx, cfg)
		if err != nil && b.spec.ReplaceMemory && b.inMemory(ctx) {
			// A bucket cannot change its storage.
			if derr := b.js.DeleteKeyValue(ctx, cfg.Bucket); derr == nil {
				kv, err = b.js.CreateOrUpdateKeyValue(ctx, cfg)
			}
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("the NATS server has JetStream off, and %s in a JetStream KV bucket: "+
			"start nats-server with -js (or enable JetStream for this account): %w", b.spec.Keeps, err)
	}
	if err != nil {
		return fmt.Errorf("kv bucket %s: %w", cfg.Bucket, err)
	}
	b.mu.Lock()
	b.kv = kv
	b.mu.Unlock()
	return nil
}

// inMemory reports whether the bucket exists on memory storage.
func (b *Bucket) inMemory(ctx context.Context) bool {
	st, err := b.js.Stream(ctx, "KV_"+b.spec.Config.Bucket)
	if err != nil {
		return false
	}
	info, err := st.Info(ctx)
	return err == nil && info.Config.Storage == jetstream.MemoryStorage
}

// KV returns the bucket as last opened.
func (b *Bucket) KV() jetstream.KeyValue {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kv
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.spec.Config.Bucket }

// Conn is the NATS connection the bucket was opened on.
func (b *Bucket) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context the bucket was opened with.
func (b *Bucket) JetStream() jetstream.JetStream { return b.js }

// Reopen opens the bucket again (creating it when a NATS restart lost
// it) and returns it.
func (b *Bucket) Reopen(ctx context.Context) (jetstream.KeyValue, error) {
	if err := b.open(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	hooks := make([]func(), 0, len(b.hooks))
	for _, f := range b.hooks {
		hooks = append(hooks, f)
	}
	b.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	return b.KV(), nil
}

// OnReopen has f called after each reopening (not after the first
// opening), until the returned func is called: the bucket may be a new,
// empty one, counting revisions from 1 again.
func (b *Bucket) OnReopen(f func()) (remove func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hooks == nil {
		b.hooks = make(map[int]func())
	}
	id := b.next
	b.next++
	b.hooks[id] = f
	return func() {
		b.mu.Lock()
		delete(b.hooks, id)
		b.mu.Unlock()
	}
}

// Do runs op on the bucket, and once more after reopening it when op
// failed for another reason than a key's state (not found, exists, or at
// another revision) while ctx is live: the bucket may be gone with a NATS
// server that lost its store.
func (b *Bucket) Do(ctx context.Context, op func(jetstream.KeyValue) error) error {
	err := op(b.KV())
	if err == nil || KeyState(err) || ctx.Err() != nil {
		return err
	}
	kv, rerr := b.Reopen(ctx)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	return op(kv)
}

// KeyState reports whether err is about a key's state rather than the
// bucket: the key is missing, exists, or is at another revision.
func KeyState(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// Keys lists the keys matching filter ("id.*"; ">" for all) that the
// bucket's stream holds, sorted, with the stream's last sequence when it
// was asked. A key whose last entry is a delete marker is listed too: Get
// tells. Unlike a watch's initial values, the answer is exact and cannot
// end early.
func (b *Bucket) Keys(ctx context.Context, filter string) ([]string, uint64, error) {
	stream, err := b.js.Stream(ctx, "KV_"+b.Name())
	if err != nil {
		return nil, 0, err
	}
	pre := "$KV." + b.Name() + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(pre+filter))
	if err != nil {
		return nil, 0, err
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, pre))
	}
	slices.Sort(keys)
	return keys, info.State.LastSeq, nil
}

// Created is when the bucket's current stream was made: it changes when
// the bucket is deleted and made again, which ends no watch.
func (b *Bucket) Created(ctx context.Context) (time.Time, error) {
	stream, err := b.js.Stream(ctx, "KV_"+b.Name())
	if err != nil {
		return time.Time{}, fmt.Errorf("bucket %s: %w", b.Name(), err)
	}
	return stream.CachedInfo().Created, nil
}

// Each calls f with every current entry of kv whose key matches filter
// (">" for all; deleted keys left out), as a watch lists them, until f
// returns false. An entry written meanwhile may hide another; use Keys
// where that matters.
func Each(ctx context.Context, kv jetstream.KeyValue, filter string, f func(jetstream.KeyValueEntry) bool) error {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended before it listed every key (NATS connection lost?)")
			}
			if e == nil || !f(e) {
				return nil
			}
		}
	}
}
