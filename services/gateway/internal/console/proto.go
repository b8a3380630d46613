package console

import (
	"net/http"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	historyv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/history/v1"
)

// writeProto answers a protobuf message as JSON (proto field names).
func writeProto(w http.ResponseWriter, m proto.Message) {
	data, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "encode: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// approvalFields describes how a person decided a monitored call, or nil
// for a call that needed no approval.
func approvalFields(rec *historyv1.AuditRecord) []field {
	a := rec.GetApproval()
	if a == nil {
		return nil
	}
	decision := a.GetState()
	if s := a.GetScope(); s != "" {
		decision += " · " + s
	}
	out := []field{{"Decision", decision}, {"Decided by", a.GetDecidedBy()}}
	if ms := a.GetDecidedAtUnixMilli(); ms > 0 {
		out = append(out, field{"Decided at", time.UnixMilli(ms).UTC().Format(time.RFC3339)})
	}
	waited := "no wait (an earlier approval for the session)"
	if ms := a.GetWaitedMs(); ms > 0 {
		waited = human(time.Duration(ms) * time.Millisecond)
	}
	out = append(out, field{"Waited", waited})
	if id := a.GetRequestId(); id != "" {
		out = append(out, field{"Request", id})
	}
	return out
}
