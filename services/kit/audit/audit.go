// Package audit carries the audit trail from the services that dispatch tool
// calls (gateway, agent) to the history service: records go to the
// JetStream stream SOV_AUDIT on <prefix>.audit.record.<source>, so nothing
// is lost while history is down, and history consumes them with a durable
// consumer. A record that history cannot store is parked on
// <prefix>.audit.dead.<reason> in SOV_AUDIT_DEAD.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/config"
)

// Stream and consumer names.
const (
	Stream     = "SOV_AUDIT"
	DeadStream = "SOV_AUDIT_DEAD"
	// Consumer is the durable consumer the history replicas share.
	Consumer = "history"
	// HeaderReason is the header of a parked record that says why.
	HeaderReason = "Sov-Dead-Reason"
)

// Limits of a record, in characters.
const (
	MaxArgumentChars = 4000
	MaxResultChars   = 2000
)

// Defaults of StreamConfig.
const (
	DefaultMaxAge   = 7 * 24 * time.Hour
	DefaultMaxBytes = 256 << 20
	DeadMaxAge      = 30 * 24 * time.Hour
)

// RecordSubject is where source publishes records.
func RecordSubject(prefix, source string) string { return prefix + ".audit.record." + source }

// DeadSubject is where a record that cannot be stored is parked.
func DeadSubject(prefix, reason string) string { return prefix + ".audit.dead." + reason }

// StreamConfig bounds the stream. Records wait in it while history is down;
// when it is full (MaxBytes) publishers are refused and keep records in
// their own bounded buffer, and records older than MaxAge are dropped by
// NATS.
type StreamConfig struct {
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas for a clustered NATS (1 for a single server).
	Replicas int
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Replicas <= 0 {
		c.Replicas = config.JetStreamReplicas()
	}
	return c
}

// EnsureStreams creates the audit stream and the dead-letter stream, or
// with update also applies cfg to existing ones. History owns their limits
// and updates; publishers only create missing streams, so records published
// before history ever ran are kept and the two never fight over limits.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, prefix string, cfg StreamConfig, update bool) (jetstream.Stream, error) {
	if !update {
		if s, err := js.Stream(ctx, Stream); err == nil {
			if _, err := js.Stream(ctx, DeadStream); err == nil {
				return s, nil
			}
		}
	}
	cfg = cfg.withDefaults()
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        Stream,
		Description: "Sovereign audit records on their way to history",
		Subjects:    []string{prefix + ".audit.record.>"},
		Storage:     jetstream.FileStorage,
		// A record leaves the stream once history has stored it, so the
		// stream holds only the backlog.
		Retention:  jetstream.WorkQueuePolicy,
		Discard:    jetstream.DiscardNew,
		MaxAge:     cfg.MaxAge,
		MaxBytes:   cfg.MaxBytes,
		Replicas:   cfg.Replicas,
		Duplicates: 10 * time.Minute,
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("audit stream: NATS has no JetStream (run nats-server with -js): %w", err)
		}
		return nil, fmt.Errorf("audit stream %s: %w%s", Stream, err, storageHint(err))
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DeadStream,
		Description: "Sovereign audit records history could not store, with the reason",
		Subjects:    []string{prefix + ".audit.dead.>"},
		Storage:     jetstream.FileStorage,
		MaxAge:      DeadMaxAge,
		MaxBytes:    cfg.MaxBytes / 4,
		Discard:     jetstream.DiscardOld,
		Replicas:    cfg.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("audit dead-letter stream %s: %w%s", DeadStream, err, storageHint(err))
	}
	return s, nil
}

// storageHint advises on a JetStream that cannot reserve the streams' size.
func storageHint(err error) string {
	var apiErr *jetstream.APIError
	// 10047: insufficient storage resources (nats.go names no constant).
	if errors.As(err, &apiErr) && apiErr.ErrorCode == 10047 {
		return " (JetStream cannot reserve that much storage: lower --audit-stream-max-bytes or raise the server's max_file_store)"
	}
	return ""
}

// Truncate returns the first n characters (runes) of s and the number of
// characters s had. Invalid UTF-8 is replaced first, so the cut never
// splits a character.
func Truncate(s string, n int) (string, int) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	count := utf8.RuneCountInString(s)
	if count <= n {
		return s, count
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k], count
		}
		i++
	}
	return s, count
}

// Hidden replaces the values of sensitive arguments.
const Hidden = "[hidden]"

// hideValues replaces the values of the named members of a JSON object
// with Hidden; input that is not an object becomes Hidden as a whole.
func hideValues(args []byte, names []string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		b, _ := json.Marshal(Hidden)
		return b
	}
	hidden, _ := json.Marshal(Hidden)
	for _, k := range names {
		if _, ok := m[k]; ok {
			m[k] = hidden
		}
	}
	b, _ := json.Marshal(m)
	return b
}
