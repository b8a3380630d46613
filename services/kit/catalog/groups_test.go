package catalog

import (
	"slices"
	"strings"
	"testing"
)

func TestGroups(t *testing.T) {
	for _, tool := range Tools() {
		if g := GroupOf(tool.Name); (g == "") != tool.System {
			t.Errorf("tool %s is in group %q (system: %v): every tool but the system tools is in one group", tool.Name, g, tool.System)
		}
	}
	for _, tt := range []struct {
		spec      string
		has, hasn []string
		err       string
	}{
		{spec: "all", has: []string{"open", "pdf", "login"}},
		{spec: "", has: []string{"performance_start"}},
		{spec: "forms", has: []string{"open", "snapshot", "check"}, hasn: []string{"pdf", "login", "upload_file"}},
		{spec: "all,-perf,-identity", has: []string{"pdf", "drop"}, hasn: []string{"performance_start", "heap_snapshot", "login"}},
		{spec: "core, console_messages", has: []string{"console_messages", "click"}, hasn: []string{"network_requests"}},
		{spec: "-core", has: []string{"open"}, hasn: []string{"pdf"}},
		{spec: "core,fs_read", err: `"fs_read" is neither a tool group`},
		{spec: "everything", err: "core, forms, files, devtools, perf, storage, identity, agent, or all"},
	} {
		sel, err := ParseSelection(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseSelection(%q) error = %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSelection(%q): %v", tt.spec, err)
			continue
		}
		for _, n := range tt.has {
			if !sel.Has(n) {
				t.Errorf("ParseSelection(%q) lacks %s (selected: %v)", tt.spec, n, sel.Names())
			}
		}
		for _, n := range tt.hasn {
			if sel.Has(n) {
				t.Errorf("ParseSelection(%q) has %s", tt.spec, n)
			}
		}
	}
	if names := GroupNames(); !slices.Equal(names, []string{"core", "forms", "files", "devtools", "perf", "storage", "identity", "agent"}) {
		t.Errorf("GroupNames() = %v", names)
	}
}
