package approve

import (
	"slices"
	"testing"

	"github.com/sovereign-fleet/sovereign/services/gateway/internal/dispatch"
	"github.com/sovereign-fleet/sovereign/services/kit/approval"
)

// TestDecision: how a person's reply to the approval form decides.
func TestDecision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   dispatch.Reply
		approve bool
		scope   approval.Scope
		err     bool
	}{
		{"declined", dispatch.Reply{}, false, "", false},
		{"once", dispatch.Reply{Accepted: true, Fields: map[string]any{decisionField: approveOnce}}, true, approval.Once, false},
		{"session", dispatch.Reply{Accepted: true, Fields: map[string]any{decisionField: approveSession}}, true, approval.Session, false},
		{"deny", dispatch.Reply{Accepted: true, Fields: map[string]any{decisionField: deny}}, false, "", false},
		{"no decision", dispatch.Reply{Accepted: true}, false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			approve, scope, err := decision(tc.reply)
			if approve != tc.approve || scope != tc.scope || (err != nil) != tc.err {
				t.Errorf("decision(%+v) = %v, %q, %v; want %v, %q, error %v", tc.reply, approve, scope, err, tc.approve, tc.scope, tc.err)
			}
		})
	}
}

// TestFormChoices: a call that opens a new browser session (no scope)
// cannot be approved for its session.
func TestFormChoices(t *testing.T) {
	if got := form(approval.Request{Tool: "eval", Scope: "s"}).Choices; !slices.Equal(got, []string{approveOnce, approveSession, deny}) {
		t.Errorf("form(in a session).Choices = %v", got)
	}
	if got := form(approval.Request{Tool: "eval"}).Choices; !slices.Equal(got, []string{approveOnce, deny}) {
		t.Errorf("form(new session).Choices = %v", got)
	}
}
