package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// OpenKV creates the JetStream KV bucket cfg describes, or updates it to
// cfg, on file storage with the fleet's replica count
// (SOVEREIGN_NATS_REPLICAS) unless cfg says otherwise. keeps says what the
// bucket holds ("the agent keeps its runs"), for the error of a NATS
// server without JetStream, which tells the operator how to fix it.
func OpenKV(ctx context.Context, nc *nats.Conn, cfg jetstream.KeyValueConfig, keeps string) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Storage == jetstream.FileStorage && cfg.Replicas == 0 { // FileStorage is the zero value
		cfg.Replicas = config.JetStreamReplicas()
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("the NATS server has JetStream off, and %s in a JetStream KV bucket: "+
			"start nats-server with -js (or enable JetStream for this account): %w", keeps, err)
	}
	if err != nil {
		return nil, fmt.Errorf("kv bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// BucketName is the name of a JetStream bucket of the bus prefix:
// BucketName("sov", "_agent") is "sov_agent" ("" is "sov" too).
// Characters a bucket name cannot hold become "_".
func BucketName(prefix, suffix string) string {
	if prefix == "" {
		prefix = "sov"
	}
	b := []byte(prefix + suffix)
	for i, c := range b {
		if !(c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			b[i] = '_'
		}
	}
	return string(b)
}
