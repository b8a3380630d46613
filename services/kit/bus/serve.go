package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
)

// Handle adapts a typed handler to a micro.Handler. Each request runs in its
// own goroutine (micro delivers one endpoint's requests one at a time), under
// a context that carries the caller's deadline and trace, inside a server
// span. fn's *Error becomes a micro error reply with its code; any other
// error is INTERNAL. A panic is recovered and answered as INTERNAL.
//
// Replies larger than the connection's max payload are sent in parts (see
// [HeaderChunks]) that [Conn.Request] puts back together.
func Handle[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](c *Conn, fn func(context.Context, PReq) (Resp, error)) micro.Handler {
	tracer := otel.Tracer(tracerName)
	return micro.HandlerFunc(func(r micro.Request) {
		// The reply is published by this goroutine, not through r: micro
		// reads r's state as soon as Handle returns. micro's stats thus
		// count requests but not their latency or errors; the spans do.
		msg := requestMsg{subject: r.Subject(), reply: r.Reply(), headers: nats.Header(r.Headers()), data: r.Data()}
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Done()
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), headerCarrier(msg.headers))
			ctx, span := tracer.Start(ctx, msg.subject, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(append(spanAttrs(msg.subject, "process", "process"),
					attribute.Int("messaging.message.body.size", len(msg.data)))...))
			defer span.End()
			timeout := DefaultTimeout
			if ms, err := strconv.ParseInt(msg.headers.Get(HeaderTimeout), 10, 64); err == nil && ms > 0 {
				timeout = time.Duration(ms) * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			defer c.track(msg.reply, cancel)()

			resp, err := call(ctx, msg, fn)
			if err == nil {
				err = c.respond(msg.reply, resp)
			}
			if err != nil {
				code := CodeOf(err)
				endFailed(span, err)
				if code == commonv1.ErrorCode_INTERNAL {
					slog.ErrorContext(ctx, "request failed", "subject", msg.subject, "err", err)
				}
				if rerr := c.respondError(msg.reply, code, err.Error()); rerr != nil {
					slog.WarnContext(ctx, "send error reply", "subject", msg.subject, "err", rerr)
				}
			}
		}()
	})
}

// requestMsg is what a handler goroutine keeps of a micro request.
type requestMsg struct {
	subject, reply string
	headers        nats.Header
	data           []byte
}

// MaxErrorMessage caps the message of an error reply: it travels in a
// header, and a reply larger than the payload limit would not arrive at all.
const MaxErrorMessage = 8 << 10

func (c *Conn) respondError(reply string, code commonv1.ErrorCode, text string) error {
	if len(text) > MaxErrorMessage {
		text = text[:MaxErrorMessage] + fmt.Sprintf("… (%d more bytes)", len(text)-MaxErrorMessage)
	}
	m := nats.NewMsg(reply)
	m.Header.Set(headerErrorCode, code.String())
	m.Header.Set(headerError, text)
	return c.nc.PublishMsg(m)
}

// Wait blocks until every handler goroutine started by [Handle] on c has
// replied, or ctx ends. Shutdown calls it after stopping the services.
func (c *Conn) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func call[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](ctx context.Context, r requestMsg, fn func(context.Context, PReq) (Resp, error)) (resp Resp, err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.ErrorContext(ctx, "handler panic", "subject", r.subject, "panic", p, "stack", string(debug.Stack()))
			err = Errorf(commonv1.ErrorCode_INTERNAL, "internal error in %s: %v", r.subject, p)
		}
	}()
	req := PReq(new(Req))
	if err := proto.Unmarshal(r.data, req); err != nil {
		return resp, Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "decode request on %s: %v", r.subject, err)
	}
	resp, err = fn(ctx, req)
	if errors.Is(err, context.DeadlineExceeded) {
		err = Errorf(commonv1.ErrorCode_TIMEOUT, "%s: deadline exceeded", r.subject)
	}
	return resp, err
}

func (c *Conn) respond(reply string, resp proto.Message) error {
	data, err := proto.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode reply: %w", err)
	}
	if len(data) > MaxReply {
		return Errorf(commonv1.ErrorCode_TOO_LARGE, "reply is %d bytes; the bus carries at most %d", len(data), MaxReply)
	}
	part := c.partSize()
	if len(data) <= part {
		return c.nc.Publish(reply, data)
	}
	n := (len(data) + part - 1) / part
	for i := 0; i < n; i++ {
		m := nats.NewMsg(reply)
		m.Header.Set(HeaderChunks, strconv.Itoa(n))
		m.Data = data[i*part : min((i+1)*part, len(data))]
		if err := c.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("send reply part %d/%d: %w", i+1, n, err)
		}
	}
	return nil
}

// partSize is the largest reply part: the payload limit less room for
// headers.
func (c *Conn) partSize() int { return int(c.nc.MaxPayload()) - 4096 }
