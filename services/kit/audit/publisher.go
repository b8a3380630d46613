package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// DefaultBuffer is how many records a publisher holds while JetStream does
// not take them (NATS down, stream full).
const DefaultBuffer = 10000

var (
	publishedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_audit_published_total",
		Help: "Audit records accepted by the JetStream audit stream.",
	}, []string{"source"})
	retriesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_audit_publish_retries_total",
		Help: "Audit record publishes that failed and were retried (NATS down or audit stream full).",
	}, []string{"source"})
	droppedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "sovereign_audit_dropped_total",
		Help: "Audit records dropped because the publisher's buffer was full or it was closed before they were accepted.",
	}, []string{"source"})
	bufferedGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sovereign_audit_buffered",
		Help: "Audit records waiting in a publisher for JetStream to accept them.",
	}, []string{"source"})
)

// Redactor replaces secrets in a record's arguments (a JSON object) and in
// free text before a record leaves the process.
type Redactor interface {
	JSON(args []byte) []byte
	Text(s string) string
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Source names the publishing service ("gateway", "agent"); it is the
	// last token of the subject and the record's source.
	Source string
	// Prefix is the bus subject prefix ("sov").
	Prefix string
	Stream StreamConfig
	// Buffer bounds the records held while JetStream refuses them
	// (DefaultBuffer when 0). When it is full, new records are dropped,
	// counted in sovereign_audit_dropped_total and logged.
	Buffer   int
	Redactor Redactor
}

// Publisher sends audit records to the stream without ever blocking the
// tool call that produced them: Publish enqueues, one goroutine publishes
// and retries until JetStream acknowledges.
type Publisher struct {
	cfg    PublisherConfig
	nc     *nats.Conn
	js     jetstream.JetStream
	queue  chan *historyv1.AuditRecord
	done   chan struct{}
	stop   chan struct{}
	closed atomic.Bool
	once   sync.Once

	// streamOK is false until the streams exist (NATS was down at start,
	// or the stream was deleted).
	streamOK atomic.Bool
	// streamCtx ends when Close gives up: retries stop.
	streamCtx            context.Context
	cancelStreamAttempts context.CancelFunc
	pending              atomic.Int64 // records in the batch being sent

	dropped, lastDropLog atomic.Int64
	published, retries   prometheus.Counter
	droppedCtr           prometheus.Counter
	buffered             prometheus.Gauge
	log                  *slog.Logger
}

// NewPublisher starts a publisher on nc. It creates the streams when it can;
// when NATS is unavailable it starts anyway and creates them once NATS is
// back, holding records meanwhile.
func NewPublisher(nc *nats.Conn, cfg PublisherConfig) (*Publisher, error) {
	if cfg.Source == "" {
		return nil, errors.New("audit publisher: source is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "sov"
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("audit publisher: %w", err)
	}
	p := &Publisher{
		cfg:        cfg,
		nc:         nc,
		js:         js,
		queue:      make(chan *historyv1.AuditRecord, cfg.Buffer),
		done:       make(chan struct{}),
		stop:       make(chan struct{}),
		published:  publishedTotal.WithLabelValues(cfg.Source),
		retries:    retriesTotal.WithLabelValues(cfg.Source),
		droppedCtr: droppedTotal.WithLabelValues(cfg.Source),
		buffered:   bufferedGauge.WithLabelValues(cfg.Source),
		log:        slog.Default().With("component", "audit", "source", cfg.Source),
	}
	p.streamCtx, p.cancelStreamAttempts = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(p.streamCtx, 5*time.Second)
	defer cancel()
	if _, err := EnsureStreams(ctx, js, cfg.Prefix, cfg.Stream, false); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, err
		}
		p.log.Warn("audit stream not ready yet; records are held until it is", "err", err)
	} else {
		p.streamOK.Store(true)
	}
	go p.run()
	return p, nil
}

// Record is what a dispatcher knows about one finished tool call.
type Record struct {
	Start          time.Time
	Duration       time.Duration
	Caller         string
	Client         string
	MCPSession     string
	BrowserSession string
	Tool           string
	// Arguments as JSON (an object) and the result or error text.
	Arguments []byte
	Result    string
	Outcome   historyv1.Outcome
	// HideArguments names arguments whose values are replaced with Hidden
	// before anything else (the text a tool typed into a password field).
	HideArguments []string
	// Trace is the call's span context (its trace id is stored).
	Trace trace.SpanContext
	// Approval is the decision on a monitored call, nil for the others.
	Approval *historyv1.Approval
}

// Publish redacts, truncates and enqueues r. It never blocks: when the
// buffer is full the record is dropped and counted.
func (p *Publisher) Publish(r Record) {
	if p.closed.Load() {
		p.drop(1, whyClosed)
		return
	}
	rec := p.build(r)
	select {
	case p.queue <- rec:
		p.buffered.Set(float64(len(p.queue)) + float64(p.pending.Load()))
	default:
		p.drop(1, whyFull)
	}
}

func (p *Publisher) build(r Record) *historyv1.AuditRecord {
	args := r.Arguments
	if len(r.HideArguments) > 0 {
		args = hideValues(args, r.HideArguments)
	}
	result := r.Result
	if p.cfg.Redactor != nil {
		args = p.cfg.Redactor.JSON(args)
		result = p.cfg.Redactor.Text(result)
	}
	a, ac := Truncate(string(args), MaxArgumentChars)
	res, rc := Truncate(result, MaxResultChars)
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	start := r.Start
	if start.IsZero() {
		start = time.Now()
	}
	rec := &historyv1.AuditRecord{
		Id:             id.String(),
		TimeUnixNano:   start.UnixNano(),
		Caller:         r.Caller,
		Client:         r.Client,
		McpSession:     r.MCPSession,
		BrowserSession: r.BrowserSession,
		Tool:           r.Tool,
		Arguments:      a,
		ArgumentsChars: int32(ac),
		Result:         res,
		ResultChars:    int32(rc),
		DurationMicros: r.Duration.Microseconds(),
		Outcome:        r.Outcome,
		Source:         p.cfg.Source,
		Approval:       r.Approval,
	}
	if r.Trace.HasTraceID() {
		rec.TraceId = r.Trace.TraceID().String()
	}
	return rec
}

func (p *Publisher) drop(n int, why string) {
	if n <= 0 {
		return
	}
	p.droppedCtr.Add(float64(n))
	total := p.dropped.Add(int64(n))
	now := time.Now().UnixNano()
	if last := p.lastDropLog.Load(); now-last > int64(10*time.Second) && p.lastDropLog.CompareAndSwap(last, now) {
		p.log.Error("audit records dropped: "+why, "dropped", n, "dropped_total", total, "buffer", p.cfg.Buffer)
	}
}

// Reasons records are dropped.
const (
	whyFull   = "the audit stream has not accepted records for a while and the buffer is full (is NATS up? is the stream full because history is not consuming?)"
	whyClosed = "the publisher was closed before the audit stream accepted them"
)

// Dropped is how many records this publisher has dropped.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

// Close stops accepting records and waits until the held ones are
// published or ctx ends; those still held then are dropped and counted.
func (p *Publisher) Close(ctx context.Context) error {
	p.once.Do(func() {
		p.closed.Store(true)
		close(p.stop)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.cancelStreamAttempts()
		<-p.done
		if n := p.dropped.Load(); n > 0 {
			return fmt.Errorf("audit: %d records were not accepted by the stream before shutdown", n)
		}
		return ctx.Err()
	}
}

// batchSize is how many records are in flight at once.
const batchSize = 256

func (p *Publisher) run() {
	defer close(p.done)
	defer p.cancelStreamAttempts()
	var batch []*historyv1.AuditRecord
	backoff := 100 * time.Millisecond
	for {
		if len(batch) == 0 {
			select {
			case r := <-p.queue:
				batch = append(batch, r)
			case <-p.stop:
				select {
				case r := <-p.queue:
					batch = append(batch, r)
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < batchSize {
			select {
			case r := <-p.queue:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		p.pending.Store(int64(len(batch)))
		failed := p.send(batch)
		p.buffered.Set(float64(len(p.queue) + len(failed)))
		batch = failed
		if len(failed) == 0 {
			backoff = 100 * time.Millisecond
			continue
		}
		p.retries.Add(float64(len(failed)))
		select {
		case <-time.After(backoff):
		case <-p.streamCtx.Done():
			p.drop(len(batch)+len(p.queue), whyClosed)
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// send publishes batch and waits for the acks; it returns the records
// JetStream did not accept.
func (p *Publisher) send(batch []*historyv1.AuditRecord) []*historyv1.AuditRecord {
	if !p.streamOK.Load() {
		ctx, cancel := context.WithTimeout(p.streamCtx, 5*time.Second)
		_, err := EnsureStreams(ctx, p.js, p.cfg.Prefix, p.cfg.Stream, false)
		cancel()
		if err != nil {
			p.log.Warn("audit stream still not ready; holding records", "held", len(batch)+len(p.queue), "err", err)
			return batch
		}
		p.streamOK.Store(true)
		p.log.Info("audit stream ready")
	}
	subject := RecordSubject(p.cfg.Prefix, p.cfg.Source)
	futures := make([]jetstream.PubAckFuture, len(batch))
	var failed []*historyv1.AuditRecord
	var firstErr error
	for i, rec := range batch {
		data, err := proto.Marshal(rec)
		if err != nil { // cannot happen for a valid message; never retry it
			p.log.Error("marshal audit record", "err", err)
			p.drop(1, "it could not be encoded")
			continue
		}
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}, jetstream.WithMsgID(rec.Id))
		if err != nil {
			failed = append(failed, rec)
			firstErr = firstOf(firstErr, err)
			continue
		}
		futures[i] = f
	}
	timeout := time.After(10 * time.Second)
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			p.published.Inc()
		case err := <-f.Err():
			failed = append(failed, batch[i])
			firstErr = firstOf(firstErr, err)
			if isStreamGone(err) {
				p.streamOK.Store(false)
			}
		case <-timeout:
			failed = append(failed, batch[i])
			firstErr = firstOf(firstErr, errors.New("no ack from JetStream within 10s"))
		}
	}
	if firstErr != nil {
		p.log.Warn("audit stream did not take records; retrying", "failed", len(failed), "err", firstErr)
	}
	return failed
}

func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func isStreamGone(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrStreamNotFound)
}
