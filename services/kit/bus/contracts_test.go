package bus_test

import (
	"testing"

	"github.com/sovereign-fleet/sovereign/services/kit/agentbus"
	"github.com/sovereign-fleet/sovereign/services/kit/browserbus"
	"github.com/sovereign-fleet/sovereign/services/kit/historybus"
	"github.com/sovereign-fleet/sovereign/services/kit/signerbus"
	"github.com/sovereign-fleet/sovereign/services/kit/toolsbus"
)

// TestContracts pins the subjects of the domains' bus packages to the
// wire names docs/subjects.md documents: both sides use the packages, so
// only this test notices a rename that would break a mixed-version fleet.
func TestContracts(t *testing.T) {
	t.Parallel()
	c := start(t)
	w := browserbus.Of("w1")
	for want, got := range map[string]string{
		"browser.open":          browserbus.Open.Subject(c),
		"browser.http":          browserbus.HTTP.Subject(c),
		"browser.w.w1":          browserbus.WorkerGroup(c, "w1"),
		"browser.w.w1.call":     w.Call.Subject(c),
		"browser.w.w1.close":    w.Close.Subject(c),
		"browser.w.w1.ping":     w.Ping.Subject(c),
		"signer":                signerbus.Group(c),
		"signer.*":              signerbus.All(c),
		"signer.login":          signerbus.Login.Subject(c),
		"signer.logout":         signerbus.Logout.Subject(c),
		"signer.status":         signerbus.Status.Subject(c),
		"signer.get_public_key": signerbus.GetPublicKey.Subject(c),
		"signer.sign_event":     signerbus.SignEvent.Subject(c),
		"signer.encrypt":        signerbus.Encrypt.Subject(c),
		"signer.decrypt":        signerbus.Decrypt.Subject(c),
		"history.audit.query":   historybus.AuditQuery.Subject(c),
		"history.chat":          historybus.ChatGroup(c),
		"history.chat.create":   historybus.ChatCreate.Subject(c),
		"history.chat.list":     historybus.ChatList.Subject(c),
		"history.chat.get":      historybus.ChatGet.Subject(c),
		"history.chat.append":   historybus.ChatAppend.Subject(c),
		"history.chat.delete":   historybus.ChatDelete.Subject(c),
		"agent.run.start":       agentbus.Start.Subject(c),
		"agent.run.get":         agentbus.Get.Subject(c),
		"agent.run.cancel":      agentbus.Cancel.Subject(c),
		"agent.run.list":        agentbus.List.Subject(c),
		"agent.run.event.r_1":   agentbus.RunEvents(c, "r_1"),
		"agent.settings.get":    agentbus.GetSettings.Subject(c),
		"agent.settings.put":    agentbus.PutSettings.Subject(c),
		"tools":                 toolsbus.Group(c),
		"tools.list":            toolsbus.List.Subject(c),
		"tools.call":            toolsbus.Call.Subject(c),
	} {
		if want = c.Prefix() + "." + want; got != want {
			t.Errorf("subject = %q, want %q", got, want)
		}
	}
}
