package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/kvbucket"
)

// RunRetention is how long an ended run's record is kept after its last
// change; the periodic scan removes older ones.
const RunRetention = 7 * 24 * time.Hour

// Keys of the agent's KV bucket.
const (
	keyRunPrefix     = "run."     // run.<id>: the Run (protojson)
	keyActivePrefix  = "active."  // active.<id>: owner "<name>/<incarnation>" while the run has not ended
	keyReplicaPrefix = "replica." // replica.<name>: heartbeat (JSON)
	keySettings      = "settings" // the console's saved settings (JSON, API key sealed)
)

// Bucket is the KV bucket of a bus subject prefix: "sov" → "sov_agent".
func Bucket(prefix string) string {
	return bus.BucketName(prefix, "_agent")
}

// openBucket creates the bucket when it is missing (or updates its
// settings). It has no TTL (the saved settings must not expire): the
// periodic scan removes ended runs after RunRetention.
func openBucket(ctx context.Context, nc *nats.Conn, prefix string) (jetstream.KeyValue, error) {
	return kvbucket.OpenKV(ctx, nc, kvbucket.Spec{
		Config: jetstream.KeyValueConfig{
			Bucket:      Bucket(prefix),
			Description: "Sovereign agent: run records, run owners, replica heartbeats and the model provider settings",
			History:     1,
			Storage:     jetstream.FileStorage,
		},
		Keeps: "the agent keeps its runs",
	})
}

// errStop makes update leave the record as it is.
var errStop = errors.New("leave the run as it is")

func encodeRun(r *agentv1.Run) ([]byte, error) { return protojson.Marshal(r) }

func decodeRun(b []byte) (*agentv1.Run, error) {
	r := &agentv1.Run{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	return r, nil
}

// getRun reads run.<id>; jetstream.ErrKeyNotFound when there is none.
func (a *Agent) getRun(ctx context.Context, id string) (*agentv1.Run, uint64, error) {
	e, err := a.kv.Get(ctx, keyRunPrefix+id)
	if err != nil {
		return nil, 0, err
	}
	r, err := decodeRun(e.Value())
	if err != nil {
		return nil, 0, err
	}
	return r, e.Revision(), nil
}

// updateRun applies fn to the stored run and writes it back if nothing
// changed it meanwhile (compare and set), retrying on a conflict. fn
// returning errStop leaves it unwritten; updateRun then returns the stored
// run and a nil error.
func (a *Agent) updateRun(ctx context.Context, id string, fn func(*agentv1.Run) error) (*agentv1.Run, error) {
	for attempt := 0; ; attempt++ {
		r, rev, err := a.getRun(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := fn(r); err != nil {
			if errors.Is(err, errStop) {
				return r, nil
			}
			return r, err
		}
		r.UpdatedUnixMilli = time.Now().UnixMilli()
		b, err := encodeRun(r)
		if err != nil {
			return nil, err
		}
		_, err = a.kv.Update(ctx, keyRunPrefix+id, b, rev)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt >= 20 {
			return nil, fmt.Errorf("update run %s: %w", id, err)
		}
	}
}

// scan returns the current entries whose keys match filter (deleted keys
// left out).
func (a *Agent) scan(ctx context.Context, filter string) ([]jetstream.KeyValueEntry, error) {
	w, err := a.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return out, nil
			}
			if e == nil {
				return out, nil
			}
			out = append(out, e)
		}
	}
}

// heartbeat is the value of replica.<name>.
type heartbeat struct {
	Incarnation string `json:"incarnation"`
	UnixMilli   int64  `json:"unix_milli"`
}

// beat writes this replica's heartbeat.
func (a *Agent) beat(ctx context.Context) error {
	b, _ := json.Marshal(heartbeat{Incarnation: a.incarnation, UnixMilli: time.Now().UnixMilli()})
	_, err := a.kv.Put(ctx, keyReplicaPrefix+a.cfg.Name, b)
	return err
}

// terminal reports whether a run has ended.
func terminal(s agentv1.RunState) bool {
	return s == agentv1.RunState_RUN_STATE_COMPLETE || s == agentv1.RunState_RUN_STATE_ERROR || s == agentv1.RunState_RUN_STATE_CANCELLED
}
