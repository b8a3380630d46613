// Package signer is Sovereign's signer service: it holds Nostr identities
// (local keys, seeds, read-only public keys, NIP-46 bunkers and nsigner
// hardware links) and answers signing and encryption requests over NATS. A
// private key never leaves this process: no reply, log record, trace or
// audit record carries one, and keys are wiped on logout, on a login that
// replaces them, after --identity-idle without use and on Close.
//
// Identities are keyed by scope, the browser session the gateway or worker
// names: one scope never sees another's identity. The endpoints are
// sov.signer.{login,logout,status,get_public_key,sign_event,encrypt,decrypt}
// (messages in proto/sovereign/signer/v1).
//
// The signer runs as ONE replica: identities live in this process's memory,
// so a second replica would answer scopes it never saw as logged out.
//
// Requests from pages (window.nostr; they carry an origin) pass the origin
// policy (policy.go): allow, deny, or ask, which waits on the fleet's
// approval queue (approvals.go). Each is recorded in the audit trail
// (audit.go). Remembered identities are NIP-49 files per owner
// (remember.go).
//
// Package nostr holds the NIP-01, 04, 06, 19, 44 and 49 primitives, tested
// against the specifications' vectors; package nsigner the nsigner link
// protocol, both ends; package nip46 the NIP-46 client, with a test relay
// and bunker in nip46test.
package signer
