// Package bus is how Sovereign services talk: protobuf requests over NATS
// request-reply, served by nats.go/micro endpoints, with deadlines, coded
// errors, W3C trace context in headers and replies of any size.
//
// No service calls nc.Request directly: clients use [Conn.Request], servers
// wrap typed handlers with [Handle].
package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// Header names used on the bus, beside the micro error headers.
const (
	// HeaderTimeout carries the time left until the caller's deadline, in
	// milliseconds: a duration, so clock skew between hosts does not move
	// the server's deadline.
	HeaderTimeout = "sov-timeout"
	// HeaderChunks is set on every part of a reply split into several
	// messages: the number of parts.
	HeaderChunks = "sov-chunks"

	headerErrorCode = "Nats-Service-Error-Code"
	headerError     = "Nats-Service-Error"
	headerStatus    = "Status"
	statusNoReply   = "503"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// DefaultPrefix is the first token of every Sovereign subject.
const DefaultPrefix = "sov"

// MaxReply bounds a whole reassembled reply (64 MiB): a reply larger than
// this is refused with TOO_LARGE by the server before it is sent.
const MaxReply = 64 << 20

const tracerName = "github.com/sovereign-fleet/sovereign/services/kit/bus"

// Conn is a NATS connection used for Sovereign requests. It keeps one
// wildcard subscription for replies, so a reply may arrive in several
// messages (see [HeaderChunks]).
type Conn struct {
	nc     *nats.Conn
	prefix string
	inbox  string
	sub    *nats.Subscription
	next   atomic.Uint64
	tracer trace.Tracer

	mu      sync.Mutex
	pending map[string]chan *nats.Msg

	inflight sync.WaitGroup // handler goroutines of Handle

	cancelMu  sync.Mutex
	cancels   map[string]context.CancelFunc // running handlers by reply subject
	early     map[string]time.Time          // cancels that came before any handler here, by reply subject
	cancelSub *nats.Subscription

	// down is closed while the connection to NATS is lost (and replaced
	// when it is back), so that waiting requests fail at once instead of
	// at their deadline; statusCh feeds watchStatus until Close.
	downMu   sync.Mutex
	down     chan struct{}
	statusCh chan nats.Status
	watching sync.WaitGroup
}

// ErrDisconnected is in the chain of a request's error when the connection
// to NATS was lost before its reply came: the request may or may not have
// been served, and nothing says that the service behind it is gone.
var ErrDisconnected = errors.New("the connection to NATS is lost")

// ErrNoResponders is in the chain of a request's error when nothing served
// its subject: the request reached no service, so it did not run.
var ErrNoResponders = errors.New("no responders")

// New wraps nc. prefix is the subject prefix ("" means [DefaultPrefix]).
func New(nc *nats.Conn, prefix string) (*Conn, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	c := &Conn{
		nc:      nc,
		prefix:  prefix,
		inbox:   nc.NewInbox(),
		tracer:  otel.Tracer(tracerName),
		pending: make(map[string]chan *nats.Msg),
	}
	sub, err := nc.Subscribe(c.inbox+".*", c.onReply)
	if err != nil {
		return nil, fmt.Errorf("subscribe to reply inbox: %w", err)
	}
	// Replies of a busy gateway must never be dropped as a slow consumer.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("reply inbox limits: %w", err)
	}
	c.sub = sub
	// A caller that gives up says so on <prefix>.cancel with its reply
	// subject; the handler serving it (on whichever connection) stops.
	c.cancels = make(map[string]context.CancelFunc)
	c.early = make(map[string]time.Time)
	c.cancelSub, err = nc.Subscribe(c.Subject("cancel"), func(m *nats.Msg) {
		c.cancelMu.Lock()
		cancel := c.cancels[string(m.Data)]
		if cancel == nil {
			// The request and its cancel arrive on different
			// subscriptions: the cancel may come before the handler has
			// started. Kept a while, so that it still stops that handler.
			c.rememberEarly(string(m.Data))
		}
		c.cancelMu.Unlock()
		if cancel != nil {
			cancel()
		}
	})
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to cancellations: %w", err)
	}
	c.down = make(chan struct{})
	c.statusCh = nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	if !nc.IsConnected() {
		close(c.down)
	}
	c.watching.Go(c.watchStatus)
	return c, nil
}

// watchStatus keeps down in step with the connection's status.
func (c *Conn) watchStatus() {
	for st := range c.statusCh {
		c.downMu.Lock()
		select {
		case <-c.down: // down already
			if st == nats.CONNECTED {
				c.down = make(chan struct{})
			}
		default:
			if st != nats.CONNECTED {
				close(c.down)
			}
		}
		c.downMu.Unlock()
	}
}

// lost returns the channel that is closed while the connection is down.
func (c *Conn) lost() <-chan struct{} {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	return c.down
}

func disconnected(subject string) error {
	return &Error{Code: commonv1.ErrorCode_UNAVAILABLE, err: ErrDisconnected,
		Message: fmt.Sprintf("the connection to NATS is lost (%s got no answer); the call may or may not have run: retry once NATS is back", subject)}
}

// track registers the cancel func of a handler serving reply; the returned
// func unregisters it.
func (c *Conn) track(reply string, cancel context.CancelFunc) func() {
	if reply == "" {
		return func() {}
	}
	c.cancelMu.Lock()
	c.cancels[reply] = cancel
	_, early := c.early[reply]
	delete(c.early, reply)
	c.cancelMu.Unlock()
	if early {
		cancel()
	}
	return func() {
		c.cancelMu.Lock()
		delete(c.cancels, reply)
		c.cancelMu.Unlock()
	}
}

// Early cancels are kept earlyCancelTTL, at most maxEarlyCancels of them:
// every connection hears every caller's cancels, most of them for handlers
// elsewhere.
const (
	earlyCancelTTL  = time.Minute
	maxEarlyCancels = 4096
)

// rememberEarly keeps a cancel for reply, which no handler here serves
// (yet). c.cancelMu is held.
func (c *Conn) rememberEarly(reply string) {
	now := time.Now()
	if len(c.early) >= maxEarlyCancels/2 {
		for r, at := range c.early {
			if now.Sub(at) > earlyCancelTTL {
				delete(c.early, r)
			}
		}
	}
	if len(c.early) >= maxEarlyCancels {
		return
	}
	c.early[reply] = now
}

// NATS returns the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// Prefix returns the subject prefix.
func (c *Conn) Prefix() string { return c.prefix }

// Subject joins the prefix and tokens with dots: Subject("browser", "open")
// is "sov.browser.open".
func (c *Conn) Subject(tokens ...string) string {
	s := c.prefix
	for _, t := range tokens {
		s += "." + t
	}
	return s
}

// Close stops receiving replies and cancellations. It does not close the
// NATS connection.
func (c *Conn) Close() error {
	c.nc.RemoveStatusListener(c.statusCh)
	c.watching.Wait()
	return errors.Join(c.sub.Unsubscribe(), c.cancelSub.Unsubscribe())
}

func (c *Conn) onReply(m *nats.Msg) {
	c.mu.Lock()
	ch := c.pending[m.Subject]
	c.mu.Unlock()
	if ch == nil {
		return // late reply to a request that gave up
	}
	select {
	case ch <- m:
	default: // more parts than the largest reply has: a broken server
	}
}

// CallOption changes one request.
type CallOption func(*callOpts)

type callOpts struct {
	liveness      string
	livenessEvery time.Duration
}

// WithLiveness makes a long wait check, every interval, that something still
// answers on subject (a ping endpoint of the server doing the work). When
// nothing does, the request fails at once with UNAVAILABLE instead of waiting
// for its deadline: a server killed mid-request is noticed within interval.
func WithLiveness(subject string, interval time.Duration) CallOption {
	return func(o *callOpts) { o.liveness, o.livenessEvery = subject, interval }
}

// Request sends req to subject and decodes the reply into resp. The deadline
// comes from ctx ([DefaultTimeout] when it has none) and travels to the
// server. Failures are *Error values: UNAVAILABLE when nothing serves the
// subject, TIMEOUT at the deadline, or the code the server replied with.
func (c *Conn) Request(ctx context.Context, subject string, req, resp proto.Message, opts ...CallOption) (err error) {
	var o callOpts
	for _, opt := range opts {
		opt(&o)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	start := time.Now()

	ctx, span := c.tracer.Start(ctx, subject, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(spanAttrs(subject, "send", "request")...))
	defer func() {
		if err != nil {
			endFailed(span, err)
		}
		span.End()
	}()
	if host, port, err := net.SplitHostPort(c.nc.ConnectedAddr()); err == nil {
		p, _ := strconv.Atoi(port)
		span.SetAttributes(attribute.String("server.address", host), attribute.Int("server.port", p))
	}

	data, err := proto.Marshal(req)
	if err != nil {
		return Errorf(commonv1.ErrorCode_INTERNAL, "encode %s request: %v", subject, err)
	}
	span.SetAttributes(attribute.Int("messaging.message.body.size", len(data)))
	if max := c.nc.MaxPayload(); int64(len(data)) > max-4096 {
		return Errorf(commonv1.ErrorCode_TOO_LARGE, "request to %s is %d bytes; the bus takes at most %d", subject, len(data), max-4096)
	}

	inbox := c.inbox + "." + strconv.FormatUint(c.next.Add(1), 36)
	// Room for every part of the largest reply, so none is ever dropped.
	ch := make(chan *nats.Msg, MaxReply/c.partSize()+2)
	c.mu.Lock()
	c.pending[inbox] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, inbox)
		c.mu.Unlock()
	}()

	lost := c.lost()
	select {
	case <-lost:
		return disconnected(subject)
	default:
	}
	msg := nats.NewMsg(subject)
	msg.Reply = inbox
	msg.Data = data
	msg.Header.Set(HeaderTimeout, strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 1), 10))
	otel.GetTextMapPropagator().Inject(ctx, headerCarrier(msg.Header))
	if err := c.nc.PublishMsg(msg); err != nil {
		return Errorf(commonv1.ErrorCode_UNAVAILABLE, "send to %s: %v", subject, err)
	}

	var tick <-chan time.Time
	if o.liveness != "" {
		t := time.NewTicker(o.livenessEvery)
		defer t.Stop()
		tick = t.C
	}
	var parts [][]byte
	want := 1
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Errorf(commonv1.ErrorCode_TIMEOUT, "%s did not answer within %s", subject, deadline.Sub(start).Round(time.Millisecond))
			}
			// Tell the server, so that it stops work nobody waits for.
			_ = c.nc.Publish(c.Subject("cancel"), []byte(inbox))
			return Errorf(commonv1.ErrorCode_UNAVAILABLE, "%s: request cancelled", subject)
		case <-lost:
			return disconnected(subject)
		case <-tick:
			if !c.alive(ctx, o.liveness, o.livenessEvery) {
				return Errorf(commonv1.ErrorCode_UNAVAILABLE, "the service behind %s stopped answering", subject)
			}
		case m := <-ch:
			if m.Header.Get(headerStatus) == statusNoReply && len(m.Data) == 0 {
				return &Error{Code: commonv1.ErrorCode_UNAVAILABLE, err: ErrNoResponders, Message: "no service answers on " + subject}
			}
			if code := m.Header.Get(headerErrorCode); code != "" {
				return &Error{Code: parseCode(code), Message: m.Header.Get(headerError)}
			}
			if n := m.Header.Get(HeaderChunks); n != "" && len(parts) == 0 {
				want, err = strconv.Atoi(n)
				if err != nil || want < 1 {
					return Errorf(commonv1.ErrorCode_INTERNAL, "%s: bad %s header %q", subject, HeaderChunks, n)
				}
			}
			parts = append(parts, m.Data)
			if len(parts) < want {
				continue
			}
			body := parts[0]
			if want > 1 {
				body = joinParts(parts)
			}
			span.SetAttributes(attribute.Int("sovereign.reply_size", len(body)), attribute.Int("sovereign.reply_parts", want))
			if err := proto.Unmarshal(body, resp); err != nil {
				return Errorf(commonv1.ErrorCode_INTERNAL, "decode %s reply: %v", subject, err)
			}
			return nil
		}
	}
}

// alive pings subject and reports false only when nothing serves it; a slow
// or failing ping counts as alive (the main deadline still applies).
func (c *Conn) alive(ctx context.Context, subject string, within time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	return c.Serving(ctx, subject)
}

// Serving reports whether anything serves subject: it sends an empty
// request and says false only when NATS answers "no responders". Any
// reply, an error reply, a timeout (at ctx's deadline) or a failure to
// send counts as served, so that a slow service is not called missing.
// It is the one "is the signer (agent, worker…) running" probe; ctx should
// carry a short deadline.
func (c *Conn) Serving(ctx context.Context, subject string) bool {
	_, err := c.nc.RequestWithContext(ctx, subject, nil)
	return !errors.Is(err, nats.ErrNoResponders)
}

// spanAttrs are the attributes of a bus span from OpenTelemetry's messaging
// conventions. The system is "nats" (the conventions list no value for it).
func spanAttrs(subject, opType, opName string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", subject),
		attribute.String("messaging.operation.type", opType),
		attribute.String("messaging.operation.name", opName),
	}
}

// endFailed marks span failed with err's code as error.type (and as the
// status description). The message stays out of the span: it may quote a
// page or what a caller sent, which traces must not carry.
func endFailed(span trace.Span, err error) {
	code := CodeOf(err).String()
	span.SetStatus(codes.Error, code)
	span.SetAttributes(attribute.String("error.type", code))
}

func joinParts(parts [][]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
