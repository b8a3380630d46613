// Command nsigner-sim is a software nsigner: it holds Nostr keys and answers
// the nsigner link protocol (version 1) on a unix socket, a TCP address, a
// pseudo-terminal (standing in for a USB serial device) or stdin/stdout
// (the service end of a qrexec call). It is for demos and tests: a real
// nsigner keeps its keys on separate hardware or in an isolated qube.
//
//	nsigner-sim --unix /run/nsigner.sock --mnemonic-file seed.txt
//	nsigner-sim --tcp 127.0.0.1:7447 --nsec nsec1...
//	nsigner-sim --pty --mnemonic-file seed.txt      # prints /dev/pts/N
//	nsigner-sim --stdio --mnemonic-file seed.txt    # as a qrexec service
//
// The keys come from --mnemonic-file (a BIP-39 mnemonic; key index i is
// NIP-06 account i) or --nsec (repeatable; key index i is the i-th), or from
// NSIGNER_SIM_MNEMONIC_FILE / NSIGNER_SIM_NSEC (nsecs separated by spaces or
// commas). For unix, tcp and pty the address actually served is printed on
// stdout, one line; logs go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nsigner"
)

type nsecFlags []string

func (n *nsecFlags) String() string { return fmt.Sprintf("%d keys", len(*n)) }
func (n *nsecFlags) Set(s string) error {
	*n = append(*n, s)
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nsigner-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("nsigner-sim", flag.ContinueOnError)
	unixPath := fs.String("unix", "", "serve on this unix socket path")
	tcpAddr := fs.String("tcp", "", "serve on this TCP address (host:port; loopback or an isolated network only)")
	pty := fs.Bool("pty", false, "serve on a new pseudo-terminal and print its path, for the serial transport")
	stdio := fs.Bool("stdio", false, "serve one link on stdin/stdout (a qrexec service)")
	mnemonicFile := fs.String("mnemonic-file", os.Getenv("NSIGNER_SIM_MNEMONIC_FILE"), "file holding a BIP-39 mnemonic; key index i is NIP-06 account i")
	passphraseFile := fs.String("passphrase-file", "", "file holding the BIP-39 passphrase (default none)")
	accounts := fs.Int("accounts", 3, "with a mnemonic: how many accounts hello and list_keys report")
	var nsecs nsecFlags
	fs.Var(&nsecs, "nsec", "a secret key (nsec or hex) for the next slot; repeatable")
	name := fs.String("name", nsigner.DefaultDeviceName, "device name hello reports")
	reject := fs.Bool("reject", false, "refuse every sign, encrypt and decrypt request (code rejected)")
	delay := fs.Duration("delay", 0, "wait this long before answering a sign, encrypt or decrypt request, as a person would")
	badSig := fs.Bool("bad-sig", false, "return corrupted signatures (to test the host's check)")
	dropAfter := fs.Int("drop-after", 0, "close a connection when request N+1 arrives, without replying (0: never)")
	noise := fs.Bool("noise", false, "send junk lines (not JSON, stray ids, over-long) before every reply")
	onlyIndex := fs.String("only-index", "", "serve this key index only (default: $QREXEC_SERVICE_ARGUMENT with --stdio)")
	debug := fs.Bool("debug", false, "log every request's method (never its content)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	modes := 0
	for _, on := range []bool{*unixPath != "", *tcpAddr != "", *pty, *stdio} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return errors.New("give exactly one of --unix PATH, --tcp ADDR, --pty, --stdio")
	}

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	dev, err := newDevice(*mnemonicFile, *passphraseFile, *accounts, nsecs)
	if err != nil {
		return err
	}
	defer dev.Close()
	dev.Name, dev.Reject, dev.Delay, dev.BadSig, dev.DropAfter, dev.Noise, dev.Logger = *name, *reject, *delay, *badSig, *dropAfter, *noise, log
	if *onlyIndex == "" && *stdio {
		*onlyIndex = os.Getenv("QREXEC_SERVICE_ARGUMENT")
	}
	if *onlyIndex != "" {
		i, err := strconv.ParseUint(*onlyIndex, 10, 32)
		if err != nil {
			return fmt.Errorf("key index %q is not a number below 2^32", *onlyIndex)
		}
		idx := uint32(i)
		dev.OnlyIndex = &idx
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch {
	case *stdio:
		return serveOne(struct {
			io.Reader
			io.Writer
		}{os.Stdin, os.Stdout}, dev)
	case *pty:
		p, err := nsigner.OpenPTY()
		if err != nil {
			return err
		}
		defer p.Close()
		fmt.Println(p.SlavePath)
		log.Info("serving on a pseudo-terminal", "path", p.SlavePath)
		go func() {
			<-ctx.Done()
			p.Close()
		}()
		err = serveOne(p.Master, dev)
		if ctx.Err() != nil {
			return nil
		}
		return err
	default:
		network, addr := "tcp", *tcpAddr
		if *unixPath != "" {
			network, addr = "unix", *unixPath
			os.Remove(addr) // a stale socket from an earlier run
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		if network == "unix" {
			defer os.Remove(addr)
		}
		fmt.Println(ln.Addr().String())
		log.Info("listening", "network", network, "address", ln.Addr().String())
		go func() {
			<-ctx.Done()
			ln.Close()
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				return err
			}
			go func() {
				defer conn.Close()
				log.Info("link opened", "remote", conn.RemoteAddr().String())
				err := serveOne(conn, dev)
				log.Info("link closed", "reason", errString(err))
			}()
		}
	}
}

// serveOne serves one link; dropping it on purpose is not a failure.
func serveOne(conn io.ReadWriter, dev *nsigner.Device) error {
	err := nsigner.Serve(conn, dev)
	if errors.Is(err, nsigner.ErrDropped) {
		return nil
	}
	return err
}

func errString(err error) string {
	if err == nil {
		return "end of input"
	}
	return err.Error()
}

// newDevice builds the device from a mnemonic file or secret keys.
func newDevice(mnemonicFile, passphraseFile string, accounts int, nsecs []string) (*nsigner.Device, error) {
	if env := os.Getenv("NSIGNER_SIM_NSEC"); env != "" && len(nsecs) == 0 {
		nsecs = strings.FieldsFunc(env, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	}
	switch {
	case mnemonicFile != "" && len(nsecs) > 0:
		return nil, errors.New("give --mnemonic-file or --nsec, not both")
	case mnemonicFile != "":
		m, err := os.ReadFile(mnemonicFile)
		if err != nil {
			return nil, fmt.Errorf("read the mnemonic: %w", err)
		}
		var pass []byte
		if passphraseFile != "" {
			if pass, err = os.ReadFile(passphraseFile); err != nil {
				return nil, fmt.Errorf("read the passphrase: %w", err)
			}
		}
		d, err := nsigner.NewSeedDevice(string(m), strings.TrimRight(string(pass), "\r\n"), accounts)
		clear(m)
		clear(pass)
		return d, err
	case len(nsecs) > 0:
		return nsigner.NewSlotDevice(nsecs...)
	}
	return nil, errors.New("no keys: give --mnemonic-file FILE or --nsec KEY (or NSIGNER_SIM_MNEMONIC_FILE / NSIGNER_SIM_NSEC)")
}
