package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sovereign-fleet/sovereign/services/kit/audit"
)

// Clean makes s storable by every backend: invalid UTF-8 sequences and NUL
// bytes (which PostgreSQL text rejects) become U+FFFD. Both backends store
// what Clean returns, so they behave the same.
func Clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}

// Truncate cleans s (see Clean) and returns its first n characters (runes)
// and the number of characters it had. The cut never splits a character.
func Truncate(s string, n int) (string, int) {
	return audit.Truncate(Clean(s), n)
}

// CheckText validates a text filter: at least MinTextSearch characters.
func CheckText(text string) error {
	if n := utf8.RuneCountInString(text); n < MinTextSearch {
		return fmt.Errorf("%w: text filter %q has %d characters, at least %d are needed", ErrInvalid, text, n, MinTextSearch)
	}
	return nil
}

// PageLimit is the page size for a requested limit: DefaultPage when n is
// not positive, at most MaxPage.
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultPage
	case n > MaxPage:
		return MaxPage
	}
	return n
}
