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
	"go.opentelemetry.io/otel/codes"
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
		go func() {
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), headerCarrier(r.Headers()))
			ctx, span := tracer.Start(ctx, r.Subject(), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("messaging.system", "nats"),
					attribute.String("messaging.destination.name", r.Subject())))
			defer span.End()
			cancel := func() {}
			if ms, err := strconv.ParseInt(nats.Header(r.Headers()).Get(HeaderDeadline), 10, 64); err == nil {
				ctx, cancel = context.WithDeadline(ctx, time.UnixMilli(ms))
			} else {
				ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
			}
			defer cancel()

			resp, err := call(ctx, r, fn)
			if err == nil {
				err = c.respond(r, resp)
			}
			if err != nil {
				code := CodeOf(err)
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(attribute.String("sovereign.error_code", code.String()))
				if code == commonv1.ErrorCode_INTERNAL {
					slog.ErrorContext(ctx, "request failed", "subject", r.Subject(), "err", err)
				}
				if rerr := r.Error(code.String(), err.Error(), nil); rerr != nil {
					slog.WarnContext(ctx, "send error reply", "subject", r.Subject(), "err", rerr)
				}
			}
		}()
	})
}

func call[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](ctx context.Context, r micro.Request, fn func(context.Context, PReq) (Resp, error)) (resp Resp, err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.ErrorContext(ctx, "handler panic", "subject", r.Subject(), "panic", p, "stack", string(debug.Stack()))
			err = Errorf(commonv1.ErrorCode_INTERNAL, "internal error in %s: %v", r.Subject(), p)
		}
	}()
	req := PReq(new(Req))
	if err := proto.Unmarshal(r.Data(), req); err != nil {
		return resp, Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "decode request on %s: %v", r.Subject(), err)
	}
	resp, err = fn(ctx, req)
	if errors.Is(err, context.DeadlineExceeded) {
		err = Errorf(commonv1.ErrorCode_TIMEOUT, "%s: deadline exceeded", r.Subject())
	}
	return resp, err
}

func (c *Conn) respond(r micro.Request, resp proto.Message) error {
	data, err := proto.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode reply: %w", err)
	}
	if len(data) > MaxReply {
		return Errorf(commonv1.ErrorCode_TOO_LARGE, "reply is %d bytes; the bus carries at most %d", len(data), MaxReply)
	}
	part := int(c.nc.MaxPayload()) - 4096
	if len(data) <= part {
		return r.Respond(data)
	}
	n := (len(data) + part - 1) / part
	hdr := micro.WithHeaders(micro.Headers{HeaderChunks: []string{strconv.Itoa(n)}})
	for i := 0; i < n; i++ {
		end := min((i+1)*part, len(data))
		if err := r.Respond(data[i*part:end], hdr); err != nil {
			return fmt.Errorf("send reply part %d/%d: %w", i+1, n, err)
		}
	}
	return nil
}
