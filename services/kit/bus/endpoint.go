package bus

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"
)

// Endpoint is one request-reply endpoint of a service's contract: its
// subject (the prefix, Group's tokens and Name) and its request and reply
// types. A domain's bus package (signerbus, historybus, agentbus…)
// declares each endpoint once; the service adds it to the micro group of
// the same tokens and its callers Call it, so no subject is spelled on
// two sides.
type Endpoint[Req, Resp proto.Message] struct {
	Group []string // subject tokens after the prefix: {"signer"}, {"history", "chat"}
	Name  string   // the micro endpoint's name: the subject's last token
}

// Subject is the endpoint's subject on c: <prefix>.<group…>.<name>.
func (e Endpoint[Req, Resp]) Subject(c *Conn) string {
	return c.Subject(slices.Concat(e.Group, []string{e.Name})...)
}

// Call sends req to the endpoint and returns its reply (see Conn.Request).
func (e Endpoint[Req, Resp]) Call(ctx context.Context, c *Conn, req Req, opts ...CallOption) (Resp, error) {
	var zero Resp
	resp := zero.ProtoReflect().Type().New().Interface().(Resp)
	if err := c.Request(ctx, e.Subject(c), req, resp, opts...); err != nil {
		return zero, err
	}
	return resp, nil
}
