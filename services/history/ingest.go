package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

var (
	ingestedTotal = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_history_audit_stored_total",
		Help: "Audit records stored (duplicates from redelivery not counted).",
	})
	duplicateTotal = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_history_audit_duplicates_total",
		Help: "Audit records delivered again after they were stored, and skipped.",
	})
	deadTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_history_audit_parked_total",
		Help: "Malformed audit records parked on the dead-letter stream, by reason.",
	}, []string{"reason"})
	storeErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "sovereign_history_audit_store_errors_total",
		Help: "Batches the database refused (they are delivered again).",
	})
	backlogGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "sovereign_audit_backlog",
		Help: "Audit records in the stream that history has not stored yet.",
	})
	streamBytesGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "sovereign_audit_stream_bytes",
		Help: "Bytes held by the audit stream (its limit is --audit-stream-max-bytes).",
	})
)

// consumerConfig is the durable consumer every history replica shares.
func consumerConfig(prefix string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       audit.Consumer,
		Description:   "history: stores audit records",
		FilterSubject: prefix + ".audit.record.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 20000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// consume attaches to the durable consumer and stores records in batches
// until ctx ends, re-attaching after NATS or the consumer go away.
func (s *Service) consume(ctx context.Context) error {
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		err := s.consumeOnce(ctx)
		if ctx.Err() != nil {
			break
		}
		s.log.Warn("audit consumer stopped; attaching again", "err", err, "in", backoff.String())
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

func (s *Service) consumeOnce(ctx context.Context) error {
	prefix := s.bus.Prefix()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := audit.EnsureStreams(actx, s.js, prefix, s.cfg.Stream, false); err != nil {
		cancel()
		return err
	}
	cons, err := s.js.CreateOrUpdateConsumer(actx, audit.Stream, consumerConfig(prefix))
	cancel()
	if err != nil {
		return fmt.Errorf("audit consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * s.cfg.Batch))
	if err != nil {
		return fmt.Errorf("audit consumer: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}

	batch := make([]jetstream.Msg, 0, s.cfg.Batch)
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		batch = append(batch[:0], m)
		// Gather what is already here, without waiting for a full batch:
		// a record reaches the trail within milliseconds when traffic is
		// light, and in batches of cfg.Batch when it is heavy.
		for len(batch) < s.cfg.Batch {
			m, err := it.Next(jetstream.NextMaxWait(2 * time.Millisecond))
			if err != nil {
				break
			}
			batch = append(batch, m)
		}
		s.ingest(ctx, batch)
	}
}

// ingest stores one batch and acknowledges it after the commit. Malformed
// records are parked; a batch the database refuses is delivered again
// later (after one record at a time was tried, so one bad record cannot
// hold the others back).
func (s *Service) ingest(ctx context.Context, msgs []jetstream.Msg) {
	recs := make([]*historyv1.AuditRecord, 0, len(msgs))
	good := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		rec, reason := decode(m.Data())
		if reason != "" {
			s.park(ctx, m, reason)
			continue
		}
		recs = append(recs, rec)
		good = append(good, m)
	}
	if len(recs) == 0 {
		return
	}
	n, err := s.store.InsertAudit(ctx, recs)
	if err == nil {
		s.stored(n, len(recs))
		ackAll(good)
		return
	}
	if ctx.Err() != nil {
		nakAll(good, 0)
		return
	}
	storeErrors.Inc()
	if perr := s.store.Ping(ctx); perr != nil {
		s.log.Error("history database unavailable; audit records stay in the stream", "err", err, "records", len(recs))
		nakAll(good, 2*time.Second)
		select { // let the database come back before the next batch
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return
	}
	// The database answers but refused the batch: store one by one and
	// park the record it refuses on its own.
	for i, rec := range recs {
		n, err := s.store.InsertAudit(ctx, recs[i:i+1])
		switch {
		case err == nil:
			s.stored(n, 1)
			_ = good[i].Ack()
		case ctx.Err() != nil:
			_ = good[i].Nak()
		case s.store.Ping(ctx) != nil:
			_ = good[i].NakWithDelay(2 * time.Second)
		default:
			s.log.Error("history database refused an audit record; parking it", "id", rec.GetId(), "err", err)
			s.park(ctx, good[i], reasonStore+": "+err.Error())
		}
	}
}

func (s *Service) stored(inserted, total int) {
	ingestedTotal.Add(float64(inserted))
	if d := total - inserted; d > 0 {
		duplicateTotal.Add(float64(d))
	}
}

func ackAll(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Ack()
	}
}

func nakAll(msgs []jetstream.Msg, delay time.Duration) {
	for _, m := range msgs {
		if delay > 0 {
			_ = m.NakWithDelay(delay)
		} else {
			_ = m.Nak()
		}
	}
}

// Reasons a record is parked (the dead subject's last token).
const (
	reasonUndecodable = "undecodable"
	reasonInvalid     = "invalid"
	reasonStore       = "store"
)

// decode checks a record from the stream. It returns the record, or the
// reason it cannot be stored. Secrets are redacted again here, whatever
// the publisher did.
func decode(data []byte) (*historyv1.AuditRecord, string) {
	rec := &historyv1.AuditRecord{}
	if err := proto.Unmarshal(data, rec); err != nil {
		return nil, reasonUndecodable + ": not an AuditRecord: " + err.Error()
	}
	var problems []string
	if _, err := uuid.Parse(rec.GetId()); err != nil {
		problems = append(problems, fmt.Sprintf("id %q is not a UUID", clip(rec.GetId(), 64)))
	}
	if rec.GetTool() == "" {
		problems = append(problems, "tool is empty")
	}
	if rec.GetTimeUnixNano() <= 0 {
		problems = append(problems, "time_unix_nano is not set")
	}
	if rec.GetDurationMicros() < 0 {
		problems = append(problems, "duration_micros is negative")
	}
	if _, ok := historyv1.Outcome_name[int32(rec.GetOutcome())]; !ok {
		problems = append(problems, fmt.Sprintf("outcome %d is unknown", rec.GetOutcome()))
	}
	if len(problems) > 0 {
		return nil, reasonInvalid + ": " + strings.Join(problems, "; ")
	}
	rec.Seq = 0
	rec.Arguments = string(redact.JSON([]byte(rec.GetArguments())))
	rec.Result = redact.Text(rec.GetResult())
	return rec, ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// park moves a record history cannot store to the dead-letter stream with
// its reason, then terminates its delivery. If parking fails the record is
// delivered again later rather than lost.
func (s *Service) park(ctx context.Context, m jetstream.Msg, reason string) {
	token, _, _ := strings.Cut(reason, ":")
	deadTotal.WithLabelValues(token).Inc()
	s.log.Warn("parked a malformed audit record", "reason", reason, "subject", m.Subject(), "dead_subject", audit.DeadSubject(s.bus.Prefix(), token))
	dm := nats.NewMsg(audit.DeadSubject(s.bus.Prefix(), token))
	dm.Data = m.Data()
	dm.Header.Set(audit.HeaderReason, clip(reason, 2000))
	dm.Header.Set("Sov-Original-Subject", m.Subject())
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.js.PublishMsg(pctx, dm); err != nil {
		s.log.Error("could not park an audit record; it will be delivered again", "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	_ = m.Term()
}

// watchBacklog keeps the backlog gauges current.
func (s *Service) watchBacklog(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		if b, err := Backlog(ctx, s.js); err == nil {
			backlogGauge.Set(float64(b.Pending))
			streamBytesGauge.Set(float64(b.Bytes))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// BacklogInfo is the state of the audit stream and its consumer.
type BacklogInfo struct {
	// Pending records not stored yet (in the stream and not acknowledged).
	Pending  uint64
	Bytes    uint64
	MaxBytes int64
	MaxAge   time.Duration
	// Redelivered records are being delivered again (a database refusal
	// or a history that died mid-batch).
	Redelivered int
	// Consumers is false when no history has ever attached.
	Consumer   bool
	LastActive time.Time
	Parked     uint64
}

// Backlog reads the audit stream's state from JetStream (history need not
// run).
func Backlog(ctx context.Context, js jetstream.JetStream) (BacklogInfo, error) {
	var b BacklogInfo
	st, err := js.Stream(ctx, audit.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return b, errors.New("no audit stream yet: no gateway or history has run against this NATS")
		}
		return b, err
	}
	si, err := st.Info(ctx)
	if err != nil {
		return b, err
	}
	b.Pending, b.Bytes, b.MaxBytes, b.MaxAge = si.State.Msgs, si.State.Bytes, si.Config.MaxBytes, si.Config.MaxAge
	if c, err := st.Consumer(ctx, audit.Consumer); err == nil {
		if ci, err := c.Info(ctx); err == nil {
			b.Consumer = true
			b.Redelivered = ci.NumRedelivered
			if ci.Delivered.Last != nil {
				b.LastActive = *ci.Delivered.Last
			}
		}
	}
	if ds, err := js.Stream(ctx, audit.DeadStream); err == nil {
		if di, err := ds.Info(ctx); err == nil {
			b.Parked = di.State.Msgs
		}
	}
	return b, nil
}
