package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// group is a named list of tools.
type group struct {
	name  string
	tools []Tool
}

// Tool groups: every tool but the system tools belongs to one, so that a
// gateway can list fewer tools (--tools) and its clients spend less of a
// model's context on schemas. The groups follow the catalog's lists.
var groups = []group{
	{"core", browserTools},      // navigate, snapshot, read, act, tabs, wait, screenshot
	{"forms", formTools},        // select_option, check, fill_form, drag, mouse, get_markdown
	{"files", filesTools},       // dialogs, upload_file, drop, downloads
	{"devtools", devtoolsTools}, // console, network, resize, emulate, pdf
	{"perf", perfTools},         // performance traces, heap snapshots, screencasts, Lighthouse
	{"storage", storageTools},   // saved logins
	{"identity", identityTools}, // Nostr login
	{"agent", agentTools},       // run_browser_task and the operator's scripts
}

// GroupNames lists the tool groups, in catalog order.
func GroupNames() []string {
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.name
	}
	return names
}

// GroupOf returns the group of the tool called name ("" for a system tool
// or an unknown name).
func GroupOf(name string) string {
	for _, g := range groups {
		for _, t := range g.tools {
			if t.Name == name {
				return g.name
			}
		}
	}
	return ""
}

// Selection is which catalog tools a gateway lists: nil lists all.
type Selection map[string]bool

// Has reports whether the tool called name is selected.
func (s Selection) Has(name string) bool { return s == nil || s[name] }

// ParseSelection reads --tools: "all", or a comma-separated list of groups
// and tool names, each of which may be taken out again with a leading "-"
// ("all,-perf", "core,forms,console_messages"). The core group is always
// in: without open and snapshot no other tool is of use.
func ParseSelection(spec string) (Selection, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || strings.EqualFold(spec, "all") {
		return nil, nil
	}
	sel := Selection{}
	add := func(name string, on bool) error {
		if name == "all" {
			for _, g := range groups {
				for _, t := range g.tools {
					sel[t.Name] = on
				}
			}
			return nil
		}
		if i := slices.IndexFunc(groups, func(g group) bool { return g.name == name }); i >= 0 {
			for _, t := range groups[i].tools {
				sel[t.Name] = on
			}
			return nil
		}
		if GroupOf(name) == "" {
			return fmt.Errorf("%q is neither a tool group (%s, or all) nor a tool of one", name, strings.Join(GroupNames(), ", "))
		}
		sel[name] = on
		return nil
	}
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if part == "" {
			continue
		}
		name, off := strings.CutPrefix(part, "-")
		if err := add(name, !off); err != nil {
			return nil, err
		}
	}
	if err := add("core", true); err != nil {
		return nil, err
	}
	for name, on := range sel {
		if !on {
			delete(sel, name)
		}
	}
	return sel, nil
}

// Names lists the selected tools, sorted (for logs).
func (s Selection) Names() []string {
	out := make([]string, 0, len(s))
	for name := range s {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
