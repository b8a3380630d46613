package signer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
	"github.com/sovereign-fleet/sovereign/services/kit/redact"
)

// Every window.nostr request from a page goes into the audit trail as a
// call of tool "window.nostr.<method>" by caller "page <origin>", in the
// browser session that asked (the scope), with the origin, the top-level
// origin and the event kind as arguments, and what happened: the id of a
// signed event, or the refusal. Never the event's content, a plaintext or
// a ciphertext.

// openAudit starts the signer's audit publisher (source "signer"); without
// JetStream the signer runs without one and says so.
func (s *Service) openAudit() {
	p, err := audit.NewPublisher(s.bus.NATS(), audit.PublisherConfig{Source: "signer", Prefix: s.bus.Prefix(), Redactor: new(redact.Set)})
	if err != nil {
		s.log.Warn("no audit trail for window.nostr requests", "err", err)
		return
	}
	s.audit = p
}

// auditPage records one page request; requests without an origin (the
// agent's own, through the gateway's tools) are the gateway's to record.
func (s *Service) auditPage(ctx context.Context, start time.Time, scope string, r Request, result string, err error) {
	if s.audit == nil || r.Origin == "" {
		return
	}
	args, _ := json.Marshal(struct {
		Origin    string `json:"origin"`
		TopOrigin string `json:"top_origin,omitempty"`
		Kind      *int   `json:"kind,omitempty"`
	}{r.Origin, r.TopOrigin, kindPtr(r)})
	outcome := historyv1.Outcome_OUTCOME_OK
	if err != nil {
		result = err.Error()
		var be *bus.Error
		if errors.As(err, &be) {
			result = be.Message
		}
		switch bus.CodeOf(err) {
		case commonv1.ErrorCode_FORBIDDEN:
			outcome = historyv1.Outcome_OUTCOME_DENIED
		case commonv1.ErrorCode_TIMEOUT:
			outcome = historyv1.Outcome_OUTCOME_TIMEOUT
		default:
			outcome = historyv1.Outcome_OUTCOME_ERROR
		}
	}
	s.audit.Publish(audit.Record{
		Start: start, Duration: time.Since(start),
		Caller: "page " + r.Origin, BrowserSession: scope,
		Tool:      "window.nostr." + jsName(r.Op),
		Arguments: args, Result: result, Outcome: outcome,
		Trace: trace.SpanContextFromContext(ctx),
	})
}

// signedResult is the audit result of a signed event: its id and kind.
func signedResult(id string, kind int64) string {
	return fmt.Sprintf("signed event %s (kind %d)", id, kind)
}
