package page

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Every text a tool returns is bounded: a hostile page can make its
// title, its HTML or its snapshot as large as it likes. Each cap below has
// a marker that says what was cut and how to see the rest.
const (
	// DefaultSnapshotChars caps a snapshot (max_chars overrides it).
	DefaultSnapshotChars = 40000
	// DefaultTextChars caps get_text, get_html and eval (max_chars
	// overrides it).
	DefaultTextChars = 20000
	// MaxChars is the largest max_chars a call may ask for.
	MaxChars = 5000000
	// maxTitle caps a page title in get_title, tab lists and change
	// reports; maxURL an address.
	maxTitle    = 1000
	maxURL      = 2000
	maxTabTitle = 200
	// maxErrLine caps a console error quoted in a change report.
	maxErrLine = 300
	// snapshotNodes is how many elements a snapshot keeps per character
	// of its cap at most: the walk of a huge page stops early.
	snapshotNodesPerChar = 0.1
	// snapshotRunPerChar is how many rows (or list or tree items) of one
	// container an interactive snapshot of the page shows per character
	// of its cap (50 at the default): a grid of 2,000 rows shows its
	// first rows, a line that says how many more there are, and the rest
	// of the page, not only rows to the cap.
	snapshotRunPerChar = 1.0 / 800
)

// clipTo cuts s to n characters (runes), saying how many it left out.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			return s[:i] + fmt.Sprintf("… (%d more characters)", utf8.RuneCountInString(s[i:]))
		}
		count++
	}
	return s
}

// clipRunes returns the first n characters (runes) of s.
func clipRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// capChars returns the cap of a text result: the call's max_chars or def.
func (t *Tab) capChars(def int) int {
	if n := t.call.maxChars; n > 0 {
		return min(n, MaxChars)
	}
	return def
}

// cutMarker is the note after a text that was cut at max characters of
// total.
func cutMarker(max, total int, how string) string {
	return fmt.Sprintf("\n[cut at %d of %d characters; %s]", max, total, how)
}

// cutLines cuts a snapshot's lines to at most max characters at an element
// boundary (a whole line) and returns the text, with a marker that says
// how many lines and characters were left out and which ref to ask for to
// see them.
func cutLines(lines []string, max int) (string, bool) {
	total := 0
	for _, l := range lines {
		total += len(l) + 1
	}
	if total <= max+1 {
		return strings.Join(lines, "\n"), false
	}
	var b strings.Builder
	n := 0
	for n < len(lines) && b.Len()+len(lines[n])+1 <= max {
		b.WriteString(lines[n])
		b.WriteByte('\n')
		n++
	}
	if n == 0 {
		// One line longer than the cap: keep its start (the marker says
		// how much of the rest is left).
		b.WriteString(clipRunes(lines[0], max))
		b.WriteByte('\n')
		n = 1
	}
	left := 0
	for _, l := range lines[n:] {
		left += len(l) + 1
	}
	fmt.Fprintf(&b, "[snapshot cut at max_chars=%d: %d more lines (%d characters) not shown", max, len(lines)-n, left)
	if n < len(lines) {
		if r, parent := restRef(lines, n); r != "" {
			fmt.Fprintf(&b, "; they start at ref %s", r)
			if parent != "" {
				fmt.Fprintf(&b, " inside ref %s", parent)
			}
			b.WriteString(": take snapshot with ref=<one of these> or a larger max_chars to see them")
		} else {
			b.WriteString("; take snapshot with a larger max_chars to see them")
		}
	}
	b.WriteString("]")
	return b.String(), true
}

// restRef returns the ref of the first element line from lines[n] on and
// the ref of the element that holds it (the nearest line above with less
// indentation).
func restRef(lines []string, n int) (ref, parent string) {
	for i := n; i < len(lines) && ref == ""; i++ {
		if r, _, ok := lineRef(lines[i]); ok {
			ref, n = r, i
		}
	}
	if ref == "" {
		return "", ""
	}
	indent := len(lines[n]) - len(strings.TrimLeft(lines[n], " "))
	for i := n - 1; i >= 0; i-- {
		in := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		if in < indent {
			if r, _, ok := lineRef(lines[i]); ok {
				return ref, r
			}
			indent = in
		}
	}
	return ref, ""
}

// diffSnapshots returns the lines of now that are not in before and the
// lines of before that are gone, marked + and -; a line whose ref is in
// both with other text is marked ~ (changed). Lines keep their indent so
// the model sees where they sit.
func diffSnapshots(before, now []string) string {
	if before == nil {
		return "(no earlier snapshot of this tab: the whole snapshot follows)\n" + strings.Join(now, "\n")
	}
	byRef := map[string]string{}
	count := map[string]int{}
	for _, l := range before {
		if r, _, ok := lineRef(l); ok {
			byRef[r] = l
		} else {
			count[l]++
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, l := range now {
		if r, _, ok := lineRef(l); ok {
			seen[r] = true
			old, had := byRef[r]
			switch {
			case !had:
				out = append(out, "+ "+l)
			case old != l:
				out = append(out, "~ "+l)
			}
			continue
		}
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, "+ "+l)
	}
	for _, l := range before {
		if r, _, ok := lineRef(l); ok {
			if !seen[r] {
				out = append(out, "- "+l)
			}
		} else if count[l] > 0 {
			count[l]--
			out = append(out, "- "+l)
		}
	}
	if len(out) == 0 {
		return "(snapshot unchanged since the last one)"
	}
	return "# changed since the last snapshot (+ added, - removed, ~ changed)\n" + strings.Join(out, "\n")
}
