// Package signer is Sovereign's signer service: it holds Nostr identities
// (local keys, seeds, read-only public keys and nsigner hardware links; NIP-46
// bunkers are still to come) and answers signing and encryption requests
// over NATS. A private key never leaves this process: no reply or log record
// carries one, and keys are wiped on logout, on a login that replaces them
// and on Close.
//
// Identities are keyed by scope, the browser-session scope key the gateway
// passes: one scope never sees another's identity. The endpoints are
// sov.signer.{login,logout,status,get_public_key,sign_event,encrypt,decrypt}
// (messages in proto/sovereign/signer/v1).
//
// The signer runs as ONE replica: identities live in this process's memory,
// so a second replica would answer scopes it never saw as logged out.
//
// Origin policy: sign_event and decrypt pass through allow (policy.go), the
// hook for the per-origin allow/deny/ask policy; for now signing kinds 0, 3,
// 5 and 10002 and every decrypt from a page are denied as "needs approval".
//
// Package nostr holds the NIP-01, 04, 06, 19, 44 and 49 primitives, tested
// against the specifications' vectors, and package nsigner the nsigner link
// protocol with its simulator.
package signer
