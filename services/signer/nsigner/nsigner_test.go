package nsigner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// The first NIP-06 test vector: account 0 of this mnemonic.
const (
	testMnemonic = "leader monkey parrot ring guide accident before fence cannon height naive bean"
	testPub0     = "17162c921dc4d2518f9a101db33695df1afb56ab82f5ff3e5da6eec3ca5cd917"
)

// fastConfig is a Config with test-sized timeouts and backoff.
func fastConfig(transport, device string) Config {
	return Config{Transport: transport, Device: device, Timeout: 3 * time.Second, SlowTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

func seedDevice(t *testing.T) *Device {
	t.Helper()
	d, err := NewSeedDevice(testMnemonic, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// account returns NIP-06 account i of the test mnemonic, derived here,
// independently of the device.
func account(t *testing.T, i uint32) *nostr.SecretKey {
	t.Helper()
	k, err := nostr.KeyFromMnemonic(testMnemonic, "", i)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Wipe)
	return k
}

// shortDir is a temporary directory with a path short enough for a unix
// socket.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nsg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve accepts connections on ln and serves each with dev until the test
// ends.
func serve(t *testing.T, ln net.Listener, dev *Device) {
	t.Helper()
	links := ServeListener(ln, dev)
	t.Cleanup(links.Close)
}

func listenUnix(t *testing.T, path string, dev *Device) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, dev)
	return ln
}

func dial(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exercise runs every method against a device holding the test mnemonic's
// accounts and checks each answer against keys derived here. With only0 the
// device serves key index 0 only.
func exercise(t *testing.T, c *Client, only0 bool) {
	t.Helper()
	ctx := context.Background()
	k0, k1 := account(t, 0), account(t, 1)
	if k0.PublicKey() != testPub0 {
		t.Fatalf("NIP-06 vector: account 0 is %s, want %s", k0.PublicKey(), testPub0)
	}

	h, err := c.Hello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := 3
	if only0 {
		wantKeys = 1
	}
	if h.Proto != Proto || h.Device != DefaultDeviceName || h.Keys != wantKeys {
		t.Fatalf("hello = %+v", h)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := c.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != wantKeys || keys[0].Index != 0 || keys[0].PubKey != testPub0 || keys[0].Label != "account 0" {
		t.Fatalf("list_keys = %+v", keys)
	}
	if !only0 && keys[1].PubKey != k1.PublicKey() {
		t.Fatalf("list_keys[1] = %+v, want pubkey %s", keys[1], k1.PublicKey())
	}
	pk, err := c.GetPublicKey(ctx, 0)
	if err != nil || pk != testPub0 {
		t.Fatalf("get_public_key(0) = %q, %v", pk, err)
	}

	ev := &nostr.Event{Kind: 1, CreatedAt: 1714078911, Tags: [][]string{{"t", "nsigner"}}, Content: "hi \"there\"\n✓"}
	signed, err := c.SignEvent(ctx, 0, ev)
	if err != nil {
		t.Fatal(err)
	}
	if signed.PubKey != testPub0 || signed.Content != ev.Content || signed.Kind != 1 || signed.CreatedAt != ev.CreatedAt || len(signed.Tags) != 1 || signed.Tags[0][1] != "nsigner" {
		t.Fatalf("signed event = %+v", signed)
	}
	if signed.ID != signed.ComputeID() {
		t.Fatalf("signed id %s, computed %s", signed.ID, signed.ComputeID())
	}
	if err := nostr.VerifyEvent(signed); err != nil {
		t.Fatalf("the returned event does not verify: %v", err)
	}
	if ev.ID != "" || ev.Sig != "" {
		t.Fatal("SignEvent changed the caller's event")
	}

	// NIP-44 and NIP-04: encrypt on the device with key 0 to account 1, and
	// decrypt here with account 1's key, so the device provably used key 0.
	const secret = "meet at the usual place"
	ct, err := c.Nip44Encrypt(ctx, 0, k1.PublicKey(), secret)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := nostr.ConversationKey(k1, testPub0)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := nostr.Nip44Decrypt(ct, ck); err != nil || pt != secret {
		t.Fatalf("NIP-44 payload from the device decrypts to %q, %v", pt, err)
	}
	ct04, err := c.Nip04Encrypt(ctx, 0, k1.PublicKey(), secret)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := nostr.Nip04Decrypt(k1, testPub0, ct04); err != nil || pt != secret {
		t.Fatalf("NIP-04 payload from the device decrypts to %q, %v", pt, err)
	}
	// And the other way: encrypted here by account 1, decrypted by the device.
	ct, err = nostr.Nip44Encrypt(secret+" 44", ck)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := c.Nip44Decrypt(ctx, 0, k1.PublicKey(), ct); err != nil || pt != secret+" 44" {
		t.Fatalf("nip44_decrypt = %q, %v", pt, err)
	}
	ct04, err = nostr.Nip04Encrypt(k1, testPub0, secret+" 04")
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := c.Nip04Decrypt(ctx, 0, k1.PublicKey(), ct04); err != nil || pt != secret+" 04" {
		t.Fatalf("nip04_decrypt = %q, %v", pt, err)
	}

	if !only0 {
		// Account 1 signs too, with its own key.
		s1, err := c.SignEvent(ctx, 1, &nostr.Event{Kind: 1, CreatedAt: 1, Content: "from account 1"})
		if err != nil {
			t.Fatal(err)
		}
		if s1.PubKey != k1.PublicKey() || nostr.VerifyEvent(s1) != nil {
			t.Fatalf("account 1's event = %+v", s1)
		}
	} else {
		_, err := c.GetPublicKey(ctx, 1)
		if !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("get_public_key(1) on a link for key 0: %v, want key_not_found", err)
		}
	}
	if st := c.State(); st.State != StateConnected || st.Hello.Proto != Proto || st.LastError != "" {
		t.Fatalf("state = %+v", st)
	}
}

func TestUnixRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, seedDevice(t))
	exercise(t, dial(t, fastConfig(TransportUnix, path)), false)
}

func TestTCPRoundTrip(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, seedDevice(t))
	exercise(t, dial(t, fastConfig(TransportTCP, ln.Addr().String())), false)
}

// TestSerialRoundTrip runs the serial transport (termios raw 115200) over a
// real pseudo-terminal served in this process.
func TestSerialRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	dev := seedDevice(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(p.Master, dev)
	}()
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	c := dial(t, fastConfig(TransportSerial, p.SlavePath))
	exercise(t, c, false)

	// Reopening the device (a host restart) finds the device still there.
	c.Close()
	exercise(t, dial(t, fastConfig(TransportSerial, p.SlavePath)), false)
}

func TestSlotDevice(t *testing.T) {
	t.Parallel()
	k := account(t, 2) // any key will do
	dev, err := NewSlotDevice(nostr.EncodeNsec(k))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, dev)
	c := dial(t, fastConfig(TransportUnix, path))
	ctx := context.Background()
	keys, err := c.ListKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].PubKey != k.PublicKey() || keys[0].Label != "slot 0" {
		t.Fatalf("list_keys = %+v, %v", keys, err)
	}
	ev, err := c.SignEvent(ctx, 0, &nostr.Event{Kind: 7, CreatedAt: 2, Content: "+", PubKey: k.PublicKey()})
	if err != nil || ev.PubKey != k.PublicKey() || nostr.VerifyEvent(ev) != nil {
		t.Fatalf("sign_event = %+v, %v", ev, err)
	}
	_, err = c.GetPublicKey(ctx, 1)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeKeyNotFound || e.Local || !strings.Contains(e.Message, "slot 1") {
		t.Fatalf("get_public_key(1) = %v, want the device's key_not_found", err)
	}
	// An event naming another pubkey is refused before it reaches the device.
	_, err = c.SignEvent(ctx, 0, &nostr.Event{Kind: 1, PubKey: testPub0})
	if err == nil || !strings.Contains(err.Error(), "is not key index 0's") {
		t.Fatalf("sign_event with a foreign pubkey: %v", err)
	}
}

func TestBadSignatureRefused(t *testing.T) {
	t.Parallel()
	dev := seedDevice(t)
	dev.BadSig = true
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, dev)
	c := dial(t, fastConfig(TransportUnix, path))
	ev, err := c.SignEvent(context.Background(), 0, &nostr.Event{Kind: 1, CreatedAt: 3, Content: "x"})
	if !errors.Is(err, ErrBadSignature) || ev != nil {
		t.Fatalf("SignEvent with a corrupted signature = %v, %v; want ErrBadSignature and no event", ev, err)
	}
	if !strings.Contains(err.Error(), "does not verify against "+testPub0) {
		t.Fatalf("error does not say what failed: %v", err)
	}
}

func TestRejectIsTyped(t *testing.T) {
	t.Parallel()
	dev := seedDevice(t)
	dev.Reject = true
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, dev)
	c := dial(t, fastConfig(TransportUnix, path))
	ctx := context.Background()
	_, err := c.SignEvent(ctx, 0, &nostr.Event{Kind: 1, CreatedAt: 3, Content: "x"})
	var e *Error
	if !errors.Is(err, ErrRejected) || !errors.As(err, &e) || e.Local || e.Method != MethodSignEvent || e.Message != "denied on the device" {
		t.Fatalf("SignEvent on a rejecting device = %v", err)
	}
	if _, err := c.Nip44Decrypt(ctx, 0, testPub0, "AAAA"); !errors.Is(err, ErrRejected) {
		t.Fatalf("nip44_decrypt on a rejecting device = %v", err)
	}
	// No approval needed, so still answered.
	if pk, err := c.GetPublicKey(ctx, 0); err != nil || pk != testPub0 {
		t.Fatalf("get_public_key = %q, %v", pk, err)
	}
}

func TestDelayBeyondTimeout(t *testing.T) {
	t.Parallel()
	dev := seedDevice(t)
	// The device's person takes 5 s: long enough that the ping below
	// still finds it busy on a loaded machine (at 1.5 s, a stall of a
	// second between the timeout and the ping let the device finish first).
	dev.Delay = 5 * time.Second
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, dev)
	cfg := fastConfig(TransportUnix, path)
	cfg.SlowTimeout = 200 * time.Millisecond
	c := dial(t, cfg)
	ctx := context.Background()
	start := time.Now()
	_, err := c.SignEvent(ctx, 0, &nostr.Event{Kind: 1, CreatedAt: 3, Content: "x"})
	var e *Error
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &e) || !e.Local || !strings.Contains(e.Message, "no reply within 200ms") {
		t.Fatalf("SignEvent past the timeout = %v", err)
	}
	if el := time.Since(start); el >= dev.Delay {
		t.Fatalf("the timeout took %s: it waited for the device", el)
	}
	// The device is still waiting for its person: it answers busy.
	if err := c.Ping(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("ping while the device is busy = %v, want busy", err)
	}
	// Then it is free again, and its late reply (an id the host gave up on)
	// is dropped.
	kittest.Eventually(t, dev.Delay+30*time.Second, func() error {
		if err := c.Ping(ctx); err != nil {
			return fmt.Errorf("the device stays busy: %w", err)
		}
		return nil
	})
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(c.State().Dropped > 0, "the late reply has not been dropped")
	})
}

func TestReconnect(t *testing.T) {
	t.Parallel()
	dev := seedDevice(t)
	dev.DropAfter = 2 // hello + one call per connection
	path := filepath.Join(shortDir(t), "s")
	ln := listenUnix(t, path, dev)
	// A timeout far above the bound on failing below, so that a loaded
	// machine cannot blur the two.
	cfg := fastConfig(TransportUnix, path)
	cfg.Timeout = 30 * time.Second
	c := dial(t, cfg)
	ctx := context.Background()
	if _, err := c.GetPublicKey(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// The device drops the link with this request in flight.
	err := c.Ping(ctx)
	if !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "broke before the reply") {
		t.Fatalf("ping on a dropped link = %v", err)
	}
	// The next call reconnects transparently.
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping after the link broke: %v", err)
	}
	if st := c.State(); st.State != StateConnected {
		t.Fatalf("state = %+v", st)
	}

	// The device goes away: the link breaks and reconnecting fails.
	ln.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrLinkDown) {
		t.Fatalf("ping = %v", err)
	}
	start := time.Now()
	err = c.Ping(ctx)
	if !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("ping with the device gone = %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("failing took %s; it should not wait for the timeout", el)
	}
	st := c.State()
	if st.State == StateConnected || st.LastError == "" {
		t.Fatalf("state with the device gone = %+v", st)
	}

	// It comes back: the next call finds it.
	listenUnix(t, path, dev)
	if pk, err := c.GetPublicKey(ctx, 1); err != nil || pk != account(t, 1).PublicKey() {
		t.Fatalf("get_public_key after the device came back = %q, %v", pk, err)
	}
	if st := c.State(); st.State != StateConnected {
		t.Fatalf("state = %+v", st)
	}

	c.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("ping on a closed client = %v", err)
	}
}

// TestNoiseDropped: lines that are not JSON, replies with an id the host did
// not send and lines over MaxLine (even carrying the right id) are dropped
// and counted; the real replies still arrive.
func TestNoiseDropped(t *testing.T) {
	t.Parallel()
	dev := seedDevice(t)
	dev.Noise = true
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, dev)
	c := dial(t, fastConfig(TransportUnix, path)) // hello: 3 noise lines
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// get_public_key, then sign_event.
	ev, err := c.SignEvent(ctx, 0, &nostr.Event{Kind: 1, CreatedAt: 4, Content: "noise"})
	if err != nil || nostr.VerifyEvent(ev) != nil {
		t.Fatalf("sign_event = %+v, %v", ev, err)
	}
	if n := c.State().Dropped; n != 4*3 {
		t.Fatalf("dropped %d lines, want 12", n)
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, seedDevice(t))
	c := dial(t, fastConfig(TransportUnix, path))
	ctx := context.Background()

	// The host refuses to send a line over the limit.
	big := strings.Repeat("a", MaxLine)
	_, err := c.SignEvent(ctx, 0, &nostr.Event{Kind: 1, CreatedAt: 5, Content: big})
	var e *Error
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &e) || !e.Local || !strings.Contains(e.Message, "at most 65536") {
		t.Fatalf("SignEvent of an oversized event = %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("the link is unusable after refusing a request: %v", err)
	}

	// The device refuses a line over the limit and reads on.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "{\"v\":1,\"id\":\"1\",\"method\":\"ping\",\"pad\":\"%s\"}\n", big)
	fmt.Fprintf(conn, "{\"v\":1,\"id\":\"2\",\"method\":\"ping\"}\n")
	r := readReplies(t, conn, 2)
	if r[0].Error == nil || r[0].Error.Code != CodeTooLarge || r[0].ID != "" {
		t.Fatalf("reply to an oversized line = %+v", r[0])
	}
	if r[1].ID != "2" || string(r[1].Result) != `"pong"` {
		t.Fatalf("reply after it = %+v", r[1])
	}
}

// TestDeviceErrors checks the device's answers to bad requests.
func TestDeviceErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(shortDir(t), "s")
	listenUnix(t, path, seedDevice(t))
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lines := []string{
		`{"v":1,"id":"a","method":"reveal_secret"}`,
		`{"v":2,"id":"b","method":"ping"}`,
		`{"v":1,"id":"c","method":"get_public_key"}`,
		`{"v":1,"id":"d","method":"get_public_key","params":{"index":2147483648}}`,
		`{"v":1,"id":"e","method":"sign_event","params":{"index":0}}`,
		`{"v":1,"id":"f","method":"nip44_decrypt","params":{"index":0,"pubkey":"` + testPub0 + `","text":"not a payload"}}`,
		`not json`,
	}
	want := []struct{ id, code string }{
		{"a", CodeUnknownMethod}, {"b", CodeBadRequest}, {"c", CodeBadRequest}, {"d", CodeKeyNotFound},
		{"e", CodeBadRequest}, {"f", CodeBadRequest}, {"", CodeBadRequest},
	}
	for i, l := range lines {
		fmt.Fprintln(conn, l)
		r := readReplies(t, conn, 1)[0]
		if r.V != 1 || r.ID != want[i].id || r.Error == nil || r.Error.Code != want[i].code || r.Error.Message == "" {
			t.Errorf("%s -> %+v %+v, want id %q code %s", l, r, r.Error, want[i].id, want[i].code)
		}
	}
}

func readReplies(t *testing.T, conn net.Conn, n int) []response {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	var out []response
	for range n {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading reply %d: %v", len(out)+1, err)
		}
		var r response
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("reply %q: %v", line, err)
		}
		out = append(out, r)
	}
	if br.Buffered() > 0 {
		t.Fatalf("%d unexpected bytes after the replies", br.Buffered())
	}
	return out
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cfg := range []Config{
		{Transport: "usb", Device: "x"},
		{Transport: TransportUnix},
		{Transport: TransportTCP, Device: "localhost"},
		{Transport: TransportQrexec, Device: "-x"},
		{Transport: TransportQrexec, Device: "vault", Service: "a b"},
	} {
		if _, err := Dial(ctx, cfg); err == nil {
			t.Errorf("Dial(%+v) succeeded", cfg)
		}
	}
	_, err := Dial(ctx, fastConfig(TransportUnix, filepath.Join(shortDir(t), "none")))
	if !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Dial to a missing socket = %v", err)
	}
	_, err = Dial(ctx, fastConfig(TransportSerial, "/dev/null"))
	if err == nil || !strings.Contains(err.Error(), "is it a terminal") {
		t.Fatalf("Dial serial /dev/null = %v", err)
	}
}

var (
	simOnce sync.Once
	simDir  string
	simPath string
	simErr  error
)

// simBinary builds cmd/nsigner-sim once per test run.
func simBinary(t *testing.T) string {
	t.Helper()
	simOnce.Do(func() {
		simDir, simErr = os.MkdirTemp("", "nsigner-sim")
		if simErr != nil {
			return
		}
		simPath = filepath.Join(simDir, "nsigner-sim")
		out, err := exec.Command("go", "build", "-o", simPath, "github.com/sovereign-fleet/sovereign/services/signer/cmd/nsigner-sim").CombinedOutput()
		if err != nil {
			simErr = fmt.Errorf("go build nsigner-sim: %v\n%s", err, out)
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if simDir != "" {
		os.RemoveAll(simDir)
	}
	os.Exit(code)
}

// TestQrexec runs the qrexec transport through a stand-in qrexec-client-vm
// that, like a dom0 policy allowing one qube and one key index, starts the
// simulator as the service with the index as its argument.
func TestQrexec(t *testing.T) {
	sim := simBinary(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	if err := os.WriteFile(seed, []byte(testMnemonic+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
# stand-in for qrexec-client-vm <qube> <service>+<argument>
if [ "$1" != vault ] || [ "${2%%+*}" != qubes.NsignerRpc ]; then
	echo "Request refused" >&2
	exit 126
fi
QREXEC_SERVICE_ARGUMENT="${2#*+}" exec %q --stdio --mnemonic-file %q
`, sim, seed)
	if err := os.WriteFile(filepath.Join(dir, QrexecClient), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	cfg := fastConfig(TransportQrexec, "vault")
	c := dial(t, cfg)
	exercise(t, c, true)

	// The link is the process: when it ends, the client starts another.
	cfg.Index = 1
	c1 := dial(t, cfg)
	if pk, err := c1.GetPublicKey(context.Background(), 1); err != nil || pk != account(t, 1).PublicKey() {
		t.Fatalf("get_public_key(1) over qubes.NsignerRpc+1 = %q, %v", pk, err)
	}

	// A refused call says why.
	_, err := Dial(context.Background(), fastConfig(TransportQrexec, "work"))
	if !errors.Is(err, ErrLinkDown) || !strings.Contains(err.Error(), "Request refused") {
		t.Fatalf("Dial to a refused qube = %v", err)
	}
}

// TestSimPTY runs the simulator binary with --pty and talks to it over the
// serial transport.
func TestSimPTY(t *testing.T) {
	t.Parallel()
	sim := simBinary(t)
	cmd := exec.Command(sim, "--pty", "--nsec", nostr.EncodeNsec(account(t, 0)), "--delay", "10ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the pty path: %v", err)
	}
	path := strings.TrimSpace(line)
	if !strings.HasPrefix(path, "/dev/pts/") {
		t.Fatalf("the simulator printed %q, not a pty path", path)
	}
	c := dial(t, fastConfig(TransportSerial, path))
	ev, err := c.SignEvent(context.Background(), 0, &nostr.Event{Kind: 1, CreatedAt: 6, Content: "over a pty"})
	if err != nil || ev.PubKey != testPub0 || nostr.VerifyEvent(ev) != nil {
		t.Fatalf("sign_event over the simulator's pty = %+v, %v", ev, err)
	}
}
