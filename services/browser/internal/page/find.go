package page

import (
	"fmt"
	"regexp"
	"strings"

	commonv1 "github.com/sovereign-fleet/sovereign/proto/sovereign/common/v1"
	"github.com/sovereign-fleet/sovereign/services/kit/bus"
)

// Finding in a snapshot (snapshot's find): the lines of the full tree that
// hold a text, or match a regular expression, each with the elements that
// hold it (its ancestors, so the model sees where it is), its first
// children and the lines next to it in its parent, so that a model locates something on a big page without
// reading the whole snapshot.
const (
	// maxFind bounds the find argument.
	maxFind = 1000
	// maxFindMatches is how many matching lines a find shows; the rest
	// are counted.
	maxFindMatches = 50
	// findChildren is how many lines below a match (deeper than it) are
	// shown with it, findSiblings how many lines before and after it
	// within its parent.
	findChildren = 2
	findSiblings = 2
	// findMaxNodes bounds the elements a find walks (the request's
	// deadline bounds it too).
	findMaxNodes = 200000
)

// findMatcher returns the test for find: a case-insensitive regular
// expression when find is /…/, else a case-insensitive substring.
func findMatcher(find string) (func(string) bool, error) {
	if len(find) > maxFind {
		return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "find is %d characters long; at most %d", len(find), maxFind)
	}
	if len(find) > 2 && strings.HasPrefix(find, "/") && strings.HasSuffix(find, "/") {
		re, err := regexp.Compile("(?i)" + find[1:len(find)-1])
		if err != nil {
			return nil, bus.Errorf(commonv1.ErrorCode_INVALID_ARGUMENT, "find %q is not a valid regular expression: %v", clipTo(find, 200), err)
		}
		return re.MatchString, nil
	}
	needle := strings.ToLower(find)
	return func(line string) bool { return strings.Contains(strings.ToLower(line), needle) }, nil
}

// findLines keeps the lines that match, their ancestors and their first
// children, in order, under a header line that counts the matches; nil
// when nothing matches.
func findLines(lines []string, match func(string) bool, find string) []string {
	keep := make([]bool, len(lines))
	matches := 0
	for i, l := range lines {
		if !match(strings.TrimLeft(l, " ")) {
			continue
		}
		matches++
		if matches > maxFindMatches {
			continue
		}
		keep[i] = true
		depth := indent(l)
		parent := -1
		for j, d := i-1, depth; j >= 0 && d > 0; j-- { // the elements that hold it
			if dj := indent(lines[j]); dj < d {
				if parent < 0 {
					parent = j
				}
				keep[j], d = true, dj
			}
		}
		for j, n := i+1, 0; j < len(lines) && n < findChildren && indent(lines[j]) > depth; j, n = j+1, n+1 {
			keep[j] = true
		}
		// The lines next to it in the same parent: the checkbox of a list
		// item whose text matched, the button beside a label.
		if parent >= 0 {
			pd := indent(lines[parent])
			for j := max(parent+1, i-findSiblings); j <= min(len(lines)-1, i+findSiblings) && indent(lines[j]) > pd; j++ {
				keep[j] = true
			}
		}
	}
	if matches == 0 {
		return nil
	}
	head := fmt.Sprintf("# %d %s for find %q, with the elements that hold them", matches, plural(matches, "line matches", "lines match"), clipTo(find, 200))
	if matches > maxFindMatches {
		head += fmt.Sprintf(" (the first %d shown: narrow find, or pass ref to search one part)", maxFindMatches)
	}
	out := []string{head}
	for i, l := range lines {
		if keep[i] {
			out = append(out, l)
		}
	}
	return out
}

// indent is the number of leading spaces of a snapshot line.
func indent(line string) int {
	return len(line) - len(strings.TrimLeft(line, " "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
