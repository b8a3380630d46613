package nsigner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// DefaultDeviceName is what a Device without a Name reports in hello.
const DefaultDeviceName = "nsigner-sim/0.1"

// Device is the device end of the protocol, a software nsigner: its keys
// come from a BIP-39 seed (NIP-06 accounts by index) or from a list of
// secret keys (slots by index). Set the options before serving; one Device
// may serve several connections at once.
//
// The "approval" methods are the ones using a private key: sign_event and
// the NIP-44 and NIP-04 encrypts and decrypts. Reject and Delay apply to
// them only, as a person on a real device would approve those and not a
// hello.
type Device struct {
	// Name is reported by hello; default DefaultDeviceName.
	Name string
	// Reject refuses every approval request with code rejected.
	Reject bool
	// Delay waits this long before answering an approval request, as a
	// person deciding would.
	Delay time.Duration
	// BadSig corrupts every signature sign_event returns (for tests of the
	// host's check).
	BadSig bool
	// DropAfter > 0 closes a connection, without replying, when its
	// (DropAfter+1)th request arrives (for tests of reconnection).
	DropAfter int
	// Noise sends, before every reply, a line that is not JSON, a reply
	// with an id the host never sent and a line over MaxLine (for tests of
	// the host's line handling).
	Noise bool
	// OnlyIndex, when set, makes every other key index unknown, as a
	// qrexec service allowed one key index would.
	OnlyIndex *uint32
	// Logger receives a debug record per request (method and index, never
	// content or plaintext). Default slog.Default().
	Logger *slog.Logger

	mu         sync.Mutex
	mnemonic   string
	passphrase string
	seed       bool                        // keys are NIP-06 accounts, not slots
	listed     int                         // seed: accounts 0..listed-1 are listed
	slots      []*nostr.SecretKey          // slot device
	derived    map[uint32]*nostr.SecretKey // seed device: accounts derived so far
	closed     bool
}

// NewSeedDevice returns a Device deriving NIP-06 keys from a BIP-39
// mnemonic and optional passphrase: key index i is account i
// (m/44'/1237'/i'/0/0). hello and list_keys count accounts 0..listed-1, but
// any account below 2^31 can be used.
func NewSeedDevice(mnemonic, passphrase string, listed int) (*Device, error) {
	mnemonic = strings.Join(strings.Fields(mnemonic), " ")
	if err := nostr.ValidateMnemonic(mnemonic); err != nil {
		return nil, fmt.Errorf("nsigner device: %w", err)
	}
	if listed < 1 {
		listed = 1
	}
	return &Device{seed: true, mnemonic: mnemonic, passphrase: passphrase, listed: listed, derived: map[uint32]*nostr.SecretKey{}}, nil
}

// NewSlotDevice returns a Device holding the given secret keys (nsec or
// hex); key index i is the i-th.
func NewSlotDevice(secrets ...string) (*Device, error) {
	if len(secrets) == 0 {
		return nil, errors.New("nsigner device: no secret keys given")
	}
	d := &Device{}
	for i, s := range secrets {
		k, err := nostr.ParseSecretKey(strings.TrimSpace(s))
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("nsigner device: secret key %d: %w", i+1, err)
		}
		d.slots = append(d.slots, k)
	}
	return d, nil
}

// Close wipes the keys; requests then fail with key_not_found.
func (d *Device) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, k := range d.slots {
		k.Wipe()
	}
	for _, k := range d.derived {
		k.Wipe()
	}
	d.slots, d.derived, d.mnemonic, d.passphrase = nil, nil, "", ""
}

// count is how many keys hello reports.
func (d *Device) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.OnlyIndex != nil {
		return 1
	}
	if d.seed {
		return d.listed
	}
	return len(d.slots)
}

// indexes are the key indexes list_keys lists.
func (d *Device) indexes() []uint32 {
	if d.OnlyIndex != nil {
		return []uint32{*d.OnlyIndex}
	}
	n := d.count()
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// key returns key index, or a key_not_found error.
func (d *Device) key(index uint32) (*nostr.SecretKey, *wireError) {
	if d.OnlyIndex != nil && index != *d.OnlyIndex {
		return nil, &wireError{CodeKeyNotFound, fmt.Sprintf("key index %d is not served on this link (only %d)", index, *d.OnlyIndex)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, &wireError{CodeKeyNotFound, "the device's keys are wiped"}
	}
	if !d.seed {
		if int64(index) >= int64(len(d.slots)) {
			return nil, &wireError{CodeKeyNotFound, fmt.Sprintf("no key in slot %d (the device has %d)", index, len(d.slots))}
		}
		return d.slots[index], nil
	}
	if k, ok := d.derived[index]; ok {
		return k, nil
	}
	if index >= 1<<31 {
		return nil, &wireError{CodeKeyNotFound, fmt.Sprintf("account %d is not below 2^31", index)}
	}
	k, err := nostr.KeyFromMnemonic(d.mnemonic, d.passphrase, index)
	if err != nil {
		return nil, &wireError{CodeKeyNotFound, fmt.Sprintf("cannot derive account %d: %v", index, err)}
	}
	d.derived[index] = k
	return k, nil
}

func (d *Device) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

// ErrDropped is returned by Serve when it closed the connection because of
// Device.DropAfter.
var ErrDropped = errors.New("nsigner device: connection dropped (DropAfter)")

// Serve answers requests on conn until it ends, one at a time: a request
// arriving while an approval request (see Device) is pending gets busy; the
// others are answered in order. It returns nil at
// the end of input. With DropAfter it closes conn (when it is an io.Closer)
// and returns an error saying so.
func Serve(conn io.ReadWriter, dev *Device) error {
	s := &session{conn: conn, dev: dev, log: dev.logger(), stop: make(chan struct{})}
	defer close(s.stop)
	lr := newLineReader(conn)
	var wg sync.WaitGroup
	defer wg.Wait()
	n := 0
	for {
		line, err := lr.next()
		var tl errLineTooLong
		if errors.As(err, &tl) {
			s.log.Debug("nsigner device: request line too long", "bytes", tl.n)
			s.write(response{V: Version, Error: &wireError{CodeTooLarge, fmt.Sprintf("a request line of %d bytes is over the %d-byte limit", tl.n, MaxLine)}})
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req inRequest
		if err := json.Unmarshal(line, &req); err != nil {
			s.write(response{V: Version, Error: &wireError{CodeBadRequest, "the line is not a JSON request object"}})
			continue
		}
		n++
		if dev.DropAfter > 0 && n > dev.DropAfter {
			if c, ok := conn.(io.Closer); ok {
				c.Close()
			}
			return ErrDropped
		}
		if req.V != Version {
			s.write(response{V: Version, ID: req.ID, Error: &wireError{CodeBadRequest, fmt.Sprintf("protocol version %d is not spoken here; this device speaks %d", req.V, Version)}})
			continue
		}
		if req.ID == "" {
			s.write(response{V: Version, Error: &wireError{CodeBadRequest, "the request has no id"}})
			continue
		}
		if !s.busy.CompareAndSwap(false, true) {
			s.write(response{V: Version, ID: req.ID, Error: &wireError{CodeBusy, "another request is being answered"}})
			continue
		}
		if !isApproval(req.Method) {
			// Answered at once, so pipelined quick requests work.
			s.answer(&req)
			continue
		}
		wg.Add(1)
		go func(req inRequest) {
			defer wg.Done()
			s.answer(&req)
		}(req)
	}
}

// answer handles req and replies; the session is busy until then.
func (s *session) answer(req *inRequest) {
	result, werr := s.handle(req)
	r := response{V: Version, ID: req.ID, Error: werr}
	if werr == nil {
		b, err := json.Marshal(result)
		if err != nil {
			r.Error = &wireError{CodeBadRequest, "cannot encode the result"}
		} else {
			r.Result = b
		}
	}
	// Free the device before replying, so the host's next request, sent on
	// seeing this reply, is not answered busy.
	s.busy.Store(false)
	s.write(r)
}

// session is one connection being served.
type session struct {
	conn io.ReadWriter
	dev  *Device
	log  *slog.Logger
	busy atomic.Bool
	stop chan struct{} // closed when Serve returns

	wmu sync.Mutex
}

// write sends one reply line (with the noise first, in Noise mode).
func (s *session) write(r response) {
	line, err := encodeLine(r)
	if err != nil {
		line, _ = encodeLine(response{V: Version, ID: r.ID, Error: &wireError{CodeTooLarge, fmt.Sprintf("the reply would be over the %d-byte line limit", MaxLine)}})
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dev.Noise && r.ID != "" {
		noise := "this line is not JSON\n" +
			`{"v":1,"id":"stray-` + r.ID + `","result":"pong"}` + "\n" +
			`{"v":1,"id":"` + r.ID + `","result":"` + strings.Repeat("x", MaxLine) + `"}` + "\n"
		if _, err := io.WriteString(s.conn, noise); err != nil {
			return
		}
	}
	if _, err := s.conn.Write(line); err != nil {
		s.log.Debug("nsigner device: writing a reply failed", "error", err.Error())
	}
}

// approval methods need a person on a real device.
func isApproval(method string) bool {
	switch method {
	case MethodSignEvent, MethodNip44Encrypt, MethodNip44Decrypt, MethodNip04Encrypt, MethodNip04Decrypt:
		return true
	}
	return false
}

// handle answers one request.
func (s *session) handle(req *inRequest) (any, *wireError) {
	dev := s.dev
	s.log.Debug("nsigner device: request", "method", req.Method, "id", req.ID)
	if isApproval(req.Method) {
		if dev.Delay > 0 {
			t := time.NewTimer(dev.Delay)
			select {
			case <-t.C:
			case <-s.stop:
				t.Stop()
				return nil, &wireError{CodeTimeout, "the connection ended"}
			}
		}
		if dev.Reject {
			return nil, &wireError{CodeRejected, "denied on the device"}
		}
	}
	switch req.Method {
	case MethodHello:
		name := dev.Name
		if name == "" {
			name = DefaultDeviceName
		}
		return HelloResult{Proto: Proto, Device: name, Keys: dev.count()}, nil
	case MethodPing:
		return "pong", nil
	case MethodListKeys:
		keys := []KeyInfo{}
		for _, i := range dev.indexes() {
			k, werr := dev.key(i)
			if werr != nil {
				return nil, werr
			}
			label := fmt.Sprintf("slot %d", i)
			if dev.seed {
				label = fmt.Sprintf("account %d", i)
			}
			keys = append(keys, KeyInfo{Index: i, PubKey: k.PublicKey(), Label: label})
		}
		return keys, nil
	case MethodGetPublicKey:
		var p indexParams
		if werr := decodeParams(req.Params, &p); werr != nil {
			return nil, werr
		}
		if p.Index == nil {
			return nil, &wireError{CodeBadRequest, "params.index is required"}
		}
		k, werr := dev.key(*p.Index)
		if werr != nil {
			return nil, werr
		}
		return pubkeyResult{PubKey: k.PublicKey()}, nil
	case MethodSignEvent:
		var p signParams
		if werr := decodeParams(req.Params, &p); werr != nil {
			return nil, werr
		}
		if p.Index == nil || p.Event == nil {
			return nil, &wireError{CodeBadRequest, "params.index and params.event are required"}
		}
		k, werr := dev.key(*p.Index)
		if werr != nil {
			return nil, werr
		}
		tags := p.Event.Tags
		if tags == nil {
			tags = [][]string{}
		}
		ev := &nostr.Event{Kind: p.Event.Kind, CreatedAt: p.Event.CreatedAt, Tags: tags, Content: p.Event.Content}
		if err := nostr.SignEvent(k, ev); err != nil {
			return nil, &wireError{CodeBadRequest, fmt.Sprintf("cannot sign: %v", err)}
		}
		sig := ev.Sig
		if dev.BadSig {
			sig = corrupt(sig)
		}
		return signResult{ID: ev.ID, PubKey: ev.PubKey, Sig: sig}, nil
	case MethodNip44Encrypt, MethodNip44Decrypt, MethodNip04Encrypt, MethodNip04Decrypt:
		var p cryptParams
		if werr := decodeParams(req.Params, &p); werr != nil {
			return nil, werr
		}
		if p.Index == nil || p.PubKey == "" {
			return nil, &wireError{CodeBadRequest, "params.index and params.pubkey are required"}
		}
		k, werr := dev.key(*p.Index)
		if werr != nil {
			return nil, werr
		}
		text, err := crypt(req.Method, k, p.PubKey, p.Text)
		if err != nil {
			return nil, &wireError{CodeBadRequest, err.Error()}
		}
		return textResult{Text: text}, nil
	}
	return nil, &wireError{CodeUnknownMethod, fmt.Sprintf("method %q is not in nsigner/1", truncate(req.Method, 64))}
}

func crypt(method string, k *nostr.SecretKey, peer, text string) (string, error) {
	switch method {
	case MethodNip04Encrypt:
		return nostr.Nip04Encrypt(k, peer, text)
	case MethodNip04Decrypt:
		return nostr.Nip04Decrypt(k, peer, text)
	}
	ck, err := nostr.ConversationKey(k, peer)
	if err != nil {
		return "", err
	}
	defer clear(ck[:])
	if method == MethodNip44Encrypt {
		return nostr.Nip44Encrypt(text, ck)
	}
	return nostr.Nip44Decrypt(text, ck)
}

func decodeParams(raw json.RawMessage, v any) *wireError {
	if len(raw) == 0 {
		return &wireError{CodeBadRequest, "params are required"}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &wireError{CodeBadRequest, fmt.Sprintf("params do not match nsigner/1: %v", err)}
	}
	return nil
}

// corrupt flips one bit of a hex signature, keeping it well-formed.
func corrupt(sig string) string {
	if sig == "" {
		return sig
	}
	b := []byte(sig)
	i := len(b) / 2
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

// Links serves every connection a listener accepts with one device, until
// Close.
type Links struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// ServeListener serves each connection ln accepts with dev, in its own
// goroutine, until the returned Links is closed.
func ServeListener(ln net.Listener, dev *Device) *Links {
	l := &Links{ln: ln}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer c.Close()
				_ = Serve(c, dev)
			}()
		}
	}()
	return l
}

// Close closes the listener and every open link, and waits for them.
func (l *Links) Close() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
