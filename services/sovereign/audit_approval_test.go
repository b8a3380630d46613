package sovereign

import (
	"bytes"
	"strings"
	"testing"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// TestAuditTableApproval: the table says who decided a monitored call.
func TestAuditTableApproval(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &printer{out: &out}
	p.records([]*historyv1.AuditRecord{
		{Id: "1", Tool: "eval", Result: "2", Approval: &historyv1.Approval{State: "approved", Scope: "session", DecidedBy: "console:admin"}},
		{Id: "2", Tool: "eval", Result: "eval was denied by elicitation:claude", Outcome: historyv1.Outcome_OUTCOME_DENIED,
			Approval: &historyv1.Approval{State: "denied", DecidedBy: "elicitation:claude"}},
		{Id: "3", Tool: "eval", Approval: &historyv1.Approval{State: "timeout", DecidedBy: "timeout"}},
		{Id: "4", Tool: "snapshot", Result: "page"},
	}, false)
	p.flush()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("printed:\n%s", out.String())
	}
	for i, want := range []string{"approved by console:admin for the session; 2", "denied by elicitation:claude; eval was denied",
		"timed out waiting for approval", "page"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("line %d = %q, want it to hold %q", i+1, lines[i+1], want)
		}
	}
	if strings.Contains(lines[4], " by ") {
		t.Errorf("a call without approval shows a decision: %q", lines[4])
	}
}
