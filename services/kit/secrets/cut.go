package secrets

import (
	"math"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Scrub first, then cut. A text cut at a cap with a secret's value across
// the cut keeps the value's first part, which no later scrubbing can
// recognise. So text is never shortened by slicing it: [Cut] scrubs it and
// then cuts the scrubbed text. Cuts happen deep in code that holds no
// handle on a worker's cache (a title clipped in an event handler, a
// console line in a ring buffer), so Cut scrubs with every cache this
// process has open: scrubbing with more values than a caller's own is
// never wrong, and no caller can forget to pass its cache.

// live is the set of open caches (Watch adds, Close removes).
var live liveSet

type liveSet struct {
	mu     sync.RWMutex
	caches []*Cache
}

func (l *liveSet) add(c *Cache) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.caches = append(l.caches, c)
}

func (l *liveSet) remove(c *Cache) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.caches {
		if o == c {
			l.caches = append(l.caches[:i:i], l.caches[i+1:]...)
			return
		}
	}
}

// spans appends the matches of every open cache in s, merged, and
// returns the largest margin.
func (l *liveSet) spans(s string) ([]span, int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var sp []span
	margin := 0
	for _, c := range l.caches {
		c.mu.RLock()
		sp = c.m.spans(sp, s, 0)
		margin = max(margin, c.margin)
		c.mu.RUnlock()
	}
	return merge(sp), margin
}

// Margin returns how many bytes after a cut may still belong to an
// encoded form of a secret value that starts before it, for the secrets
// of every open cache: a reader that must cut text at n characters before
// it can scrub it (a page that cuts its own text) reads n characters plus
// Margin and hands the lot to [Cut] with more set. 0 when the process has
// no secrets.
func Margin() int {
	live.mu.RLock()
	defer live.mu.RUnlock()
	m := 0
	for _, c := range live.caches {
		c.mu.RLock()
		m = max(m, c.margin)
		c.mu.RUnlock()
	}
	return m
}

// Margin is the package's Margin for this cache's secrets.
func (c *Cache) Margin() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.margin
}

// ScrubAll is [Cache.Scrub] with the secrets of every open cache.
func ScrubAll(s string) string {
	sp, _ := live.spans(s)
	return apply(s, sp)
}

// Cut returns s scrubbed with the secrets of every open cache and then
// cut to at most n characters (runes; n < 0: no cut), and how many
// characters of the scrubbed text it left out. more says that s is only
// the start of a longer text: then the result also ends before the last
// [Margin] bytes of s, where a value may begin that s does not hold
// whole, unless a value found whole reaches past that point. A cut never
// splits a placeholder: it falls before it.
func Cut(s string, n int, more bool) (string, int) {
	sp, margin := live.spans(s)
	end := len(s)
	if more {
		end = max(0, len(s)-margin)
		for end > 0 && end < len(s) && !utf8.RuneStart(s[end]) {
			end--
		}
		for _, x := range sp {
			if x.start < end && x.end > end {
				end = x.end
			}
		}
	}
	return cutScrubbed(s[:end], sp, n)
}

// cutScrubbed writes s with the merged spans sp (those starting in s)
// replaced, stopping at n runes of output or before a placeholder that
// would pass them; it returns the text and the runes it left out.
func cutScrubbed(s string, sp []span, n int) (string, int) {
	if n < 0 {
		n = math.MaxInt // no cut
	}
	var (
		b           []byte
		done, runes int
		left        int
		stopped     bool
	)
	emit := func(t string, whole bool) {
		if stopped {
			left += utf8.RuneCountInString(t)
			return
		}
		k := utf8.RuneCountInString(t)
		if runes+k <= n {
			b = append(b, t...)
			runes += k
			return
		}
		stopped = true
		if whole {
			left += k
			return
		}
		i, c := 0, 0
		for i = range t {
			if runes+c == n {
				break
			}
			c++
		}
		b = append(b, t[:i]...)
		runes += c
		left += k - c
	}
	if len(sp) == 0 && utf8.RuneCountInString(s) <= n {
		return s, 0
	}
	for _, x := range sp {
		if x.start >= len(s) {
			break
		}
		emit(s[done:x.start], false)
		emit(x.repl, true)
		done = x.end
	}
	emit(s[done:], false)
	return unsafe.String(unsafe.SliceData(b), len(b)), left
}
