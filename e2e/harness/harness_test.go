package harness

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sovereign-fleet/sovereign/services/kit/kittest"
)

func TestParseSnapshot(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
