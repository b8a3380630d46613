package signer

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	signerv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/signer/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/natsrv/natstest"
	"github.com/sovereign-fleet/sovereign/services/signer/nip46/nip46test"
	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

// BenchmarkSigner measures one sign_event and one 1 KiB NIP-44 encrypt
// over the bus (request, policy, key, reply) for each kind of identity: a
// local key, an nsigner device on a unix socket (nsigner-sim's code), and
// a NIP-46 bunker behind a relay on loopback.
func BenchmarkSigner(b *testing.B) {
	srv := natstest.Server(b)
	s, err := New(b.Context(), Config{Logger: slog.New(slog.DiscardHandler)}, natstest.Bus(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	c := natstest.Bus(b, srv)

	dev, err := nsigner.NewSeedDevice(vecMnemonic12, "", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dev.Close)
	sock := filepath.Join(b.TempDir(), "ns.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	links := nsigner.ServeListener(ln, dev)
	b.Cleanup(links.Close)
	relay := nip46test.NewRelay(b)
	bunker := nip46test.NewBunker(b, nip46test.BunkerConfig{Relays: []string{relay.URL()}, Secret: "bench"})

	logins := []struct {
		name  string
		login *signerv1.Login
	}{
		{"local", &signerv1.Login{Method: signerv1.Method_METHOD_LOCAL, NsecOrHex: vecSecret12}},
		{"nsigner_unix", &signerv1.Login{Method: signerv1.Method_METHOD_NSIGNER, Nsigner: &signerv1.NsignerTarget{Transport: "unix", Device: sock}}},
		{"nip46_bunker", &signerv1.Login{Method: signerv1.Method_METHOD_NIP46, BunkerUrl: bunker.URL()}},
	}
	ctx := context.Background()
	text := strings.Repeat("x", 1024)
	for _, l := range logins {
		l.login.Scope = l.name
		if err := c.Request(ctx, c.Subject("signer", "login"), l.login, &signerv1.LoginResponse{}); err != nil {
			b.Fatalf("login %s: %v", l.name, err)
		}
		b.Run(l.name+"/sign_event", func(b *testing.B) {
			req := &signerv1.SignEvent{Scope: l.name, Event: &signerv1.UnsignedEvent{Kind: 1, CreatedAt: 1700000000, Content: "bench"}}
			for b.Loop() {
				if err := c.Request(ctx, c.Subject("signer", "sign_event"), req, &signerv1.SignEventResponse{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(l.name+"/nip44_encrypt_1KiB", func(b *testing.B) {
			req := &signerv1.Encrypt{Scope: l.name, PeerPubkey: vecPub24, Text: text}
			for b.Loop() {
				if err := c.Request(ctx, c.Subject("signer", "encrypt"), req, &signerv1.EncryptResponse{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
