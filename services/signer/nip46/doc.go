// Package nip46 is a NIP-46 remote-signing client: it signs events and
// encrypts or decrypts through a remote signer ("bunker") reached over
// Nostr relays, so that the user's secret key never leaves the bunker.
//
// The user gives a bunker:// token (ParseBunkerURL); Dial connects to its
// relays, sends connect with the token's secret, and learns the user's
// pubkey with get_public_key (it may differ from the remote signer's
// pubkey). The Client then offers SignEvent (whose answer is verified:
// id, BIP-340 signature, signer, and every field asked for),
// Nip44Encrypt/Decrypt, Nip04Encrypt/Decrypt, Ping and Logout, and
// reports its link in State.
//
//	c, err := nip46.Dial(ctx, nip46.Config{
//		BunkerURL: token,
//		OnAuthURL: func(u string) { /* show u to the user */ },
//	})
//	if err != nil { … }
//	defer c.Close()
//	signed, err := c.SignEvent(ctx, &nostr.Event{Kind: 1, Content: "hi"})
//
// Choices where the NIP leaves room:
//
//   - The client key is ephemeral unless Config.ClientKey is given;
//     Close wipes it.
//   - Transport: NIP-44 first. An answer in NIP-04 (its content has
//     "?iv=") is read as NIP-04 and makes every later request NIP-04. A
//     connect with no answer at all within Config.NIP04Fallback (5 s) is
//     sent once more in NIP-04 with the same request id.
//   - An auth challenge (result "auth_url") is passed to
//     Config.OnAuthURL (only http and https URLs; anything else fails the
//     request) and shown in State().PendingAuthURL; the request goes on
//     waiting for the real answer, with the same id, until its deadline.
//   - Each request is published to every connected relay. A relay that
//     drops is reconnected with backoff (250 ms doubling to 30 s, with
//     jitter), re-subscribed, and sent the requests still unanswered. A
//     websocket ping every 30 s detects dead connections.
//   - Incoming events must have a valid id and signature, be kind 24133,
//     be authored by the remote signer and p-tag the client; duplicates
//     (one answer through several relays) are dropped.
//
// Errors match ErrBadURL, ErrRejected, ErrTimeout, ErrLinkDown,
// ErrBadSignature, ErrBadResponse or ErrClosed with errors.Is. No error
// or log line holds the secret, a plaintext or decrypted content.
//
// Package nip46test has a real relay and a real bunker for tests.
package nip46
