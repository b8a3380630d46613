package natsrv_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sovereign-fleet/sovereign/services/kit/approval"
	"github.com/sovereign-fleet/sovereign/services/kit/audit"
	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/kit/tokens"
)

// freePorts returns n distinct free ports: their listeners are all held
// until the last is picked, so the kernel cannot hand out one twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// startCluster runs three clustered JetStream servers on loopback.
func startCluster(t *testing.T) []*server.Server {
	t.Helper()
	routes := freePorts(t, 3)
	var urls []*url.URL
	for _, p := range routes {
		urls = append(urls, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var srvs []*server.Server
	for i := range 3 {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "sov", Host: "127.0.0.1", Port: routes[i]},
			Routes:  urls,
		}
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		srvs = append(srvs, s)
	}
	for _, s := range srvs {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("cluster server not ready")
		}
	}
	return srvs
}

// TestReplicasSurviveAServer: with SOVEREIGN_NATS_REPLICAS=3 on a three-node
// cluster, the buckets and the audit stream the services create keep three
// copies, and a token written before one server stops is still there.
func TestReplicasSurviveAServer(t *testing.T) {
	t.Setenv("SOVEREIGN_NATS_REPLICAS", "3")
	srvs := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(s *server.Server) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc := connect(srvs[0])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// JetStream needs a meta leader before anything can be created.
	kittest.Eventually(t, 30*time.Second, func() error {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		defer acancel()
		if _, err := js.AccountInfo(actx); err != nil {
			return fmt.Errorf("the cluster's JetStream does not answer: %w", err)
		}
		return nil
	})
	store, err := tokens.Open(ctx, nc, "sov")
	if err != nil {
		t.Fatalf("tokens bucket on the cluster: %v", err)
	}
	defer store.Close()
	secret, tok, err := store.Create(ctx, tokens.Spec{Name: "survivor"})
	if err != nil || secret == "" {
		t.Fatalf("create token: %v", err)
	}
	if _, err := approval.Open(ctx, nc, "sov"); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.EnsureStreams(ctx, js, "sov", audit.StreamConfig{}, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KV_sov_tokens", "KV_sov_approvals", audit.Stream, audit.DeadStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s: %d replicas, want 3", name, r)
		}
	}

	// One server goes; the other two still have the token. The bucket's
	// stream may have had its leader there: until the two elect a new one
	// (seconds), opening it fails, as a service starting then would retry.
	srvs[2].Shutdown()
	srvs[2].WaitForShutdown()
	nc2 := connect(srvs[1])
	other := kittest.EventuallyValue(t, 30*time.Second, func() (*tokens.Store, error) {
		octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
		defer ocancel()
		other, err := tokens.Open(octx, nc2, "sov")
		if err != nil {
			return nil, fmt.Errorf("tokens bucket with a server down: %w", err)
		}
		return other, nil
	})
	defer other.Close()
	kittest.Eventually(t, 30*time.Second, func() error {
		list, err := other.List(ctx)
		if err != nil {
			return fmt.Errorf("token after a server stopped: %w", err)
		}
		return kittest.Check(len(list) == 1 && list[0].ID == tok.ID, "tokens after a server stopped: %v, want %s alone", list, tok.ID)
	})
}
