package page

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sovereign-fleet/sovereign/services/kit/catalog"
	"github.com/sovereign-fleet/sovereign/services/kit/secrets"
)

// Every text a tool returns is bounded: a hostile page can make its
// title, its HTML or its snapshot as large as it likes. Each cap below has
// a marker that says what was cut and how to see the rest.
const (
	// DefaultSnapshotChars caps a snapshot (max_chars overrides it); the
	// catalog declares it, as snapshot's default max_chars.
	DefaultSnapshotChars = catalog.SnapshotChars
	// DefaultTextChars caps get_text, get_html, eval and the other text
	// tools (max_chars overrides it; the catalog declares it too).
	DefaultTextChars = catalog.TextChars
	// MaxChars is the largest max_chars a call may ask for.
	MaxChars = catalog.MaxChars
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

// Every cut below scrubs the operator's secrets first (secrets.Cut): a
// value across a cut would otherwise leave its first part, which no later
// scrubbing recognises. Nothing in this package shortens text by slicing
// it; text that the page cuts comes with room to spare (readRoom, clip in
// page.js) and is cut again here.

// clipTo cuts s to n characters (runes), saying how many it left out.
func clipTo(s string, n int) string {
	kept, left := secrets.Cut(s, n, false)
	if left == 0 {
		return kept
	}
	return kept + fmt.Sprintf("… (%d more characters)", left)
}

// clipRunes returns the first n characters (runes) of s.
func clipRunes(s string, n int) string {
	kept, _ := secrets.Cut(s, n, false)
	return kept
}

// readRoom returns how many characters to ask the page for when the
// result is cut at limit: the margin lets the cut here see whole every
// secret value that starts before it (see cutRead).
func readRoom(limit int) int { return limit + secrets.Margin() }

// cutRead cuts text that the page read with readRoom(limit) and cut at
// that (more: it has more) to limit characters; cut reports whether the
// result is shorter than the page's text.
func cutRead(s string, limit int, more bool) (text string, cut bool) {
	kept, left := secrets.Cut(s, limit, more)
	return kept, more || left > 0
}

// Text that page.js clips (clip: names, values, titles) arrives marked,
// with room to spare: clipOpen, the characters to keep (and + when the
// text goes on past what the page sent), clipMid, the text, clipClose. resolveClips cuts each here, after scrubbing.
const (
	clipOpen  = "\ue000"
	clipMid   = "\ue001"
	clipClose = "\ue002"
)

// resolveClips replaces each marked clip in s by its text scrubbed and
// cut, with … where it was cut.
func resolveClips(s string) string {
	if !strings.Contains(s, clipOpen) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, clipOpen)
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		rest := s[i+len(clipOpen):]
		mid := strings.Index(rest, clipMid)
		count, more := strings.CutSuffix(rest[:max(mid, 0)], "+") // +: the page has more
		n, err := strconv.Atoi(count)
		end := strings.Index(rest, clipClose)
		if mid < 0 || err != nil || end < mid {
			s = rest // not one of ours: drop the stray mark
			continue
		}
		kept, _ := secrets.Cut(rest[mid+len(clipMid):end], n, more)
		b.WriteString(kept)
		b.WriteString("…")
		s = rest[end+len(clipClose):]
	}
	b.WriteString(s)
	return b.String()
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
	lines = strings.Split(secrets.ScrubAll(strings.Join(lines, "\n")), "\n") // scrub, then cut
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
