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
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// consoleAgent is the console's chat source: the agent orchestrator
// (sov.agent.run.*, sov.agent.settings.*) and the history service's chat
// store (sov.history.chat.*), asked over the bus.
type consoleAgent struct {
	bus *bus.Conn
}

var _ console.Agent = consoleAgent{}

// call sends one request; a subject nobody serves becomes an UNAVAILABLE
// error saying which service to start.
func (a consoleAgent) call(ctx context.Context, service string, req, resp proto.Message, tokens ...string) error {
	err := a.bus.Request(ctx, a.bus.Subject(tokens...), req, resp)
	if err == nil {
		return nil
	}
	var be *bus.Error
	if bus.CodeOf(err) == commonv1.ErrorCode_UNAVAILABLE && errors.As(err, &be) && strings.HasPrefix(be.Message, "no service answers") {
		hint := "`sovereign up` runs one; `sovereign agent` runs one alone"
		if service == "history" {
			hint = "`sovereign up` runs one; `sovereign history` runs one alone"
		}
		return bus.Errorf(commonv1.ErrorCode_UNAVAILABLE, "no %s service answers on NATS (is it running? %s)", service, hint)
	}
	return err
}

func (a consoleAgent) StartRun(ctx context.Context, req *agentv1.StartRunRequest) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	return run, a.call(ctx, "agent", req, run, "agent", "run", "start")
}

func (a consoleAgent) GetRun(ctx context.Context, id string) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	return run, a.call(ctx, "agent", &agentv1.GetRunRequest{Id: id}, run, "agent", "run", "get")
}

func (a consoleAgent) CancelRun(ctx context.Context, id, by string) (*agentv1.Run, error) {
	run := &agentv1.Run{}
	return run, a.call(ctx, "agent", &agentv1.CancelRunRequest{Id: id, By: by}, run, "agent", "run", "cancel")
}

func (a consoleAgent) ListRuns(ctx context.Context, req *agentv1.ListRunsRequest) ([]*agentv1.Run, error) {
	res := &agentv1.ListRunsResponse{}
	if err := a.call(ctx, "agent", req, res, "agent", "run", "list"); err != nil {
		return nil, err
	}
	return res.GetRuns(), nil
}

func (a consoleAgent) Settings(ctx context.Context) (*agentv1.Settings, error) {
	s := &agentv1.Settings{}
	return s, a.call(ctx, "agent", &agentv1.GetSettingsRequest{}, s, "agent", "settings", "get")
}

func (a consoleAgent) PutSettings(ctx context.Context, req *agentv1.PutSettingsRequest) (*agentv1.Settings, error) {
	s := &agentv1.Settings{}
	return s, a.call(ctx, "agent", req, s, "agent", "settings", "put")
}

func (a consoleAgent) ListChats(ctx context.Context, req *historyv1.ListChatSessionsRequest) (*historyv1.ListChatSessionsResponse, error) {
	res := &historyv1.ListChatSessionsResponse{}
	return res, a.call(ctx, "history", req, res, "history", "chat", "list")
}

func (a consoleAgent) GetChat(ctx context.Context, id string) (*historyv1.GetChatSessionResponse, error) {
	res := &historyv1.GetChatSessionResponse{}
	return res, a.call(ctx, "history", &historyv1.GetChatSessionRequest{Id: id}, res, "history", "chat", "get")
}

func (a consoleAgent) DeleteChat(ctx context.Context, id string) error {
	return a.call(ctx, "history", &historyv1.DeleteChatSessionRequest{Id: id}, &historyv1.DeleteChatSessionResponse{},
		"history", "chat", "delete")
}
