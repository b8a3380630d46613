package gateway

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/agent/v1"
	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/gateway/internal/console"
	"github.com/sovereign-fleet/sovereign/services/kit/agentbus"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
)

// consoleAgent is the console's chat source: the agent orchestrator
// (sov.agent.run.*, sov.agent.settings.*) and the history service's chat
// store (sov.history.chat.*), asked over the bus.
type consoleAgent struct {
	bus *bus.Conn
}

var _ console.Agent = consoleAgent{}

// call sends req to endpoint e of service; a subject nobody serves
// becomes an UNAVAILABLE error saying which service to start.
func call[Req, Resp proto.Message](ctx context.Context, c *bus.Conn, service string, e bus.Endpoint[Req, Resp], req Req) (Resp, error) {
	resp, err := e.Call(ctx, c, req)
	if err == nil {
		return resp, nil
	}
	var be *bus.Error
	if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE && errors.As(err, &be) && strings.HasPrefix(be.Message, "no service answers") {
		hint := "`sovereign up` runs one; `sovereign agent` runs one alone"
		if service == "history" {
			hint = "`sovereign up` runs one; `sovereign history` runs one alone"
		}
		return resp, bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "no %s service answers on NATS (is it running? %s)", service, hint)
	}
	return resp, err
}

func (a consoleAgent) StartRun(ctx context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error) {
	return call(ctx, a.bus, "agent", agentbus.Start, req)
}

func (a consoleAgent) GetRun(ctx context.Context, id string) (*agentv1.Run, error) {
	return call(ctx, a.bus, "agent", agentbus.Get, &agentv1.GetRunRequest{Id: id})
}

func (a consoleAgent) CancelRun(ctx context.Context, id, by string) (*agentv1.Run, error) {
	return call(ctx, a.bus, "agent", agentbus.Cancel, &agentv1.CancelRunRequest{Id: id, By: by})
}

func (a consoleAgent) ListRuns(ctx context.Context, req *agentv1.ListRunsRequest) ([]*agentv1.Run, error) {
	res, err := call(ctx, a.bus, "agent", agentbus.List, req)
	if err != nil {
		return nil, err
	}
	return res.GetRuns(), nil
}

func (a consoleAgent) Settings(ctx context.Context) (*agentv1.Settings, error) {
	return call(ctx, a.bus, "agent", agentbus.GetSettings, &agentv1.GetSettingsRequest{})
}

func (a consoleAgent) PutSettings(ctx context.Context, req *agentv1.PutSettingsRequest) (*agentv1.Settings, error) {
	return call(ctx, a.bus, "agent", agentbus.PutSettings, req)
}

func (a consoleAgent) ListChats(ctx context.Context, req *historyv1.ListChatSessionsRequest) (*historyv1.ListChatSessionsResponse, error) {
	return call(ctx, a.bus, "history", historybus.ChatList, req)
}

func (a consoleAgent) GetChat(ctx context.Context, id string) (*historyv1.GetChatSessionResponse, error) {
	return call(ctx, a.bus, "history", historybus.ChatGet, &historyv1.GetChatSessionRequest{Id: id})
}

func (a consoleAgent) DeleteChat(ctx context.Context, id string) error {
	_, err := call(ctx, a.bus, "history", historybus.ChatDelete, &historyv1.DeleteChatSessionRequest{Id: id})
	return err
}
