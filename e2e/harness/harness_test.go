package harness

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func TestParseSnapshot(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []SnapshotNode
	}{
		{"button", `- button "Save" [ref=e5]`, []SnapshotNode{{"button", "Save", "e5"}}},
		{"nested and attributes", "- main:\n  - textbox \"Name\" [ref=e2] [value=x]\n  - heading \"Form\" [level=1]",
			[]SnapshotNode{{"textbox", "Name", "e2"}}},
		{"escaped quote", `- link "say \"hi\"" [ref=e10]`, []SnapshotNode{{"link", `say "hi"`, "e10"}}},
		{"no name", `- checkbox [checked] [ref=e3]`, []SnapshotNode{{"checkbox", "", "e3"}}},
		{"no refs", "- heading \"x\"\nplain text", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseSnapshot(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("ParseSnapshot(%q) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("ParseSnapshot(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestReadSSEResponse(t *testing.T) {
	stream := ": comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"ok\":true}}\r\n\r\n"
	m, _, err := readSSEResponse(strings.NewReader(stream), 7)
	if err != nil {
		t.Fatalf("readSSEResponse: %v", err)
	}
	if string(m.ID) != "7" || string(m.Result) != `{"ok":true}` {
		t.Errorf("readSSEResponse = id %s result %s, want id 7 result {\"ok\":true}", m.ID, m.Result)
	}
	if _, _, err := readSSEResponse(strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), 2); err == nil {
		t.Errorf("readSSEResponse without the wanted id: no error")
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 10}
	b.Write([]byte("0123456789"))
	b.Write([]byte("abc"))
	if got := b.String(); !strings.HasSuffix(got, "3456789abc") || !strings.Contains(got, "3 earlier bytes dropped") {
		t.Errorf("tailBuffer.String() = %q, want the last 10 bytes and a note of 3 dropped", got)
	}
}

// TestProcKillsGroup checks that Kill reaches grandchildren and that
// TreeMemory sees the tree.
func TestProcKillsGroup(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProc("sh", sh, []string{"-c", "sleep 60 & echo started; wait"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Generous bounds: process start and exit on a loaded machine.
	kittest.Eventually(t, 30*time.Second, func() error {
		return kittest.Check(strings.Contains(p.Output(), "started"), "sh has not said it started: %q", p.Output())
	})
	m, err := TreeMemory(p.PID())
	if err != nil || m.Procs != 2 || m.RSS <= 0 {
		t.Errorf("TreeMemory(sh) = %+v, %v; want 2 processes with some RSS", m, err)
	}
	children, _ := childMap()
	kids := children[p.PID()]
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	// A killed child is gone, or a zombie until its new parent reaps it.
	running := func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && !strings.Contains(string(b), ") Z ")
	}
	for _, k := range kids {
		kittest.Eventually(t, 30*time.Second, func() error {
			return kittest.Check(!running(k), "child %d of the killed process still runs", k)
		})
	}
}

// TestOnFreePort checks that a process that lost its port to another
// socket is started again on another port, and that any other failure is
// returned as it is.
func TestOnFreePort(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	start := func(script string) (*Proc, error) {
		p, err := StartProc("sh", sh, []string{"-c", script}, nil, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = p.Kill() })
		return p, nil
	}
	var ports []int
	err = onFreePort(func(port int) (*Proc, error) {
		ports = append(ports, port)
		if len(ports) > 1 {
			return start("sleep 60")
		}
		p, err := start("echo 'listen tcp 127.0.0.1:1: bind: address already in use'; exit 1")
		if err != nil {
			return nil, err
		}
		<-p.Done()
		return p, errors.New("exited")
	})
	if err != nil || len(ports) != 2 {
		t.Errorf("onFreePort after a taken port = %v with %d tries, want success on the second", err, len(ports))
	}
	tries := 0
	err = onFreePort(func(port int) (*Proc, error) {
		tries++
		p, err := start("echo 'no such flag'; exit 2")
		if err != nil {
			return nil, err
		}
		<-p.Done()
		return p, errors.New("exited: no such flag")
	})
	if err == nil || !strings.Contains(err.Error(), "no such flag") || tries != 1 {
		t.Errorf("onFreePort with another failure = %v after %d tries, want that error after 1", err, tries)
	}
}
