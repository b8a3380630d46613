// Package natsrv runs an embedded NATS server with JetStream, for
// `sovereign up` and for tests.
package natsrv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configure an embedded server.
type Options struct {
	// Listen is host:port for clients; "" or a port of -1 means no listener
	// (in-process connections only); port 0 picks a free port.
	Listen string
	// DataDir holds JetStream's store (DataDir/nats). Empty means a
	// temporary store (1 GiB at most) removed by Stop.
	DataDir string
	// MaxPayload overrides the 1 MiB default (0 keeps it).
	MaxPayload int32
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
	tmp string // the temporary store to remove at Stop
}

// Start starts the server and waits until it takes connections.
func Start(o Options) (*Server, error) {
	opts := &server.Options{
		ServerName:            "sovereign-embedded",
		JetStream:             true,
		NoSigs:                true,
		NoLog:                 true,
		DisableShortFirstPing: true,
		MaxPayload:            o.MaxPayload,
	}
	tmp := ""
	if o.DataDir != "" {
		opts.StoreDir = filepath.Join(o.DataDir, "nats")
	} else {
		// Not NATS's default (a shared directory under /tmp): another
		// server's streams would show up here.
		dir, err := os.MkdirTemp("", "sovereign-nats-")
		if err != nil {
			return nil, fmt.Errorf("nats store: %w", err)
		}
		tmp = dir
		opts.JetStreamMaxStore = 1 << 30
		opts.StoreDir = dir
	}
	if o.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen address %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("nats listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		} else if ln, err := net.Listen("tcp", o.Listen); err != nil {
			// The server would only log this and never become ready: say
			// it now.
			return nil, fmt.Errorf("nats cannot listen on %s: %w", o.Listen, err)
		} else {
			_ = ln.Close()
		}
		opts.Host, opts.Port = host, p
	}
	s, err := server.NewServer(opts)
	if err != nil {
		removeTmp(tmp)
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		removeTmp(tmp)
		return nil, fmt.Errorf("nats server on %s did not start within 10s (port in use?)", o.Listen)
	}
	return &Server{Server: s, tmp: tmp}, nil
}

// Stop shuts the server down, waits for it and removes a temporary store.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
	removeTmp(s.tmp)
}

func removeTmp(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
