// Package signer is Sovereign's signer service: it holds Nostr identities
// (local keys, seeds, read-only public keys, NIP-46 bunkers and nsigner
// hardware links) and answers signing and encryption requests over NATS.
// A private key never leaves this process.
//
// Work in progress (issue 3): internal/nostr holds the NIP-01, 04, 06, 19,
// 44 and 49 primitives, tested against the specifications' vectors, and
// internal/nsigner the nsigner link protocol with its simulator.
package signer
