// Package signerbus is the signer's contract on the bus: its endpoints
// (sov.signer.<name>), declared here once for the signer that serves them
// and for the browser workers and the gateway that call them.
package signerbus

import (
	"context"

	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

var group = []string{"signer"}

// The signer's endpoints.
var (
	// Login logs a scope in (the request carries secrets: never log it).
	Login = bus.Endpoint[*signerv1.Login, *signerv1.LoginResponse]{Group: group, Name: "login"}
	// Logout wipes a scope's identity.
	Logout = bus.Endpoint[*signerv1.Logout, *signerv1.LogoutResponse]{Group: group, Name: "logout"}
	// Status reports a scope's identity.
	Status = bus.Endpoint[*signerv1.Status, *signerv1.StatusResponse]{Group: group, Name: "status"}
	// Move hands a scope's identity to another (a restored session).
	Move = bus.Endpoint[*signerv1.Move, *signerv1.MoveResponse]{Group: group, Name: "move"}
	// GetPublicKey is window.nostr.getPublicKey for a page.
	GetPublicKey = bus.Endpoint[*signerv1.GetPublicKey, *signerv1.GetPublicKeyResponse]{Group: group, Name: "get_public_key"}
	// SignEvent is window.nostr.signEvent for a page.
	SignEvent = bus.Endpoint[*signerv1.SignEvent, *signerv1.SignEventResponse]{Group: group, Name: "sign_event"}
	// Encrypt is window.nostr's nip04/nip44 encrypt for a page.
	Encrypt = bus.Endpoint[*signerv1.Encrypt, *signerv1.EncryptResponse]{Group: group, Name: "encrypt"}
	// Decrypt is window.nostr's nip04/nip44 decrypt for a page.
	Decrypt = bus.Endpoint[*signerv1.Decrypt, *signerv1.DecryptResponse]{Group: group, Name: "decrypt"}
)

// Group is the subject of the signer's micro group: sov.signer.
func Group(c *bus.Conn) string { return c.Subject(group...) }

// All is the subject that names every endpoint (sov.signer.*), for
// messages.
func All(c *bus.Conn) string { return c.Subject(append(group, "*")...) }

// Serving reports whether a signer runs: anything answers its status
// endpoint (see bus.Conn.Serving; give ctx a short deadline).
func Serving(ctx context.Context, c *bus.Conn) bool { return c.Serving(ctx, Status.Subject(c)) }
