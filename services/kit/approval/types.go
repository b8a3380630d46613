package approval

import "time"

// State is where an approval request stands.
type State string

// States. Pending is the only one that changes; the others are final.
const (
	Pending  State = "pending"
	Approved State = "approved"
	Denied   State = "denied"
	TimedOut State = "timeout"
)

// Scope says how far an approval reaches.
type Scope string

// Scopes of an approval.
const (
	Once    Scope = "once"    // this call only
	Session Scope = "session" // this call and later calls of the same tool in the same browser session
)

// Request is one monitored call waiting for (or past) a person's decision.
// It is what the console and an elicitation show: the exact tool and
// arguments (redacted: secret values never appear; {{secrets.NAME}}
// placeholders do).
type Request struct {
	ID        string    `json:"id"`        // random, URL-safe
	Tool      string    `json:"tool"`      // e.g. "eval", or "open" for a URL grant
	Arguments string    `json:"arguments"` // JSON object text, without the session handle
	Reason    string    `json:"reason"`    // why it needs approval, e.g. `tool "eval" is monitored (global policy)`
	Caller    string    `json:"caller"`    // token name or "anonymous"
	Client    string    `json:"client"`    // MCP clientInfo, when known
	Scope     string    `json:"scope_key"` // opaque key of the browser-session binding (digest), for session grants
	Grant     string    `json:"grant"`     // what approve-for-session grants: the tool name, or "url:<host>"
	Created   time.Time `json:"created"`
	Deadline  time.Time `json:"deadline"`
	State     State     `json:"state"`
	Decision  Scope     `json:"decision,omitempty"`   // with Approved
	DecidedBy string    `json:"decided_by,omitempty"` // "console:<admin>", "elicitation:<client>", "timeout", "cancelled"
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Note      string    `json:"note,omitempty"`

	// Owner is an opaque digest of the caller's credential: a call that
	// resumes a request (the retry of a 2026 client's multi round-trip call)
	// must come from the same caller. It is not for display.
	Owner string `json:"owner,omitempty"`
	// Call is an opaque digest of the exact tool and arguments (never shown).
	Call string `json:"call,omitempty"`
	// Consumed is when the gateway ran the approved call of a request that
	// is resumed by a later call (multi round-trip); a request is used at
	// most once. Zero for requests decided while their call waited.
	Consumed time.Time `json:"consumed,omitzero"`
}

// Waited is how long the request waited for its decision (until now while
// it is pending).
func (r Request) Waited() time.Duration {
	end := r.DecidedAt
	if r.State == Pending || end.IsZero() {
		end = time.Now()
	}
	return max(end.Sub(r.Created), 0)
}

// Grant is an approval for the rest of a browser session: what it allows and
// who gave it.
type Grant struct {
	Grant     string    `json:"grant"`                // e.g. "tool:eval"
	RequestID string    `json:"request_id,omitempty"` // the request whose decision made it
	DecidedBy string    `json:"decided_by,omitempty"`
	Created   time.Time `json:"created"`
}
