package capacity

import (
	"sync"
	"time"
)

// usage is what this gateway saw of its clients since the keeper last
// wrote it back: calls per record key, and open streams.
type usage struct {
	mu      sync.Mutex
	used    map[string]time.Time
	streams map[string]int
}

func newUsage() *usage { return &usage{used: map[string]time.Time{}, streams: map[string]int{}} }

// touch notes a call on the record of key.
func (u *usage) touch(key string) {
	u.mu.Lock()
	u.used[key] = time.Now()
	u.mu.Unlock()
}

// stream notes an open stream on the record of key until the returned func.
func (u *usage) stream(key string) (end func()) {
	u.mu.Lock()
	u.streams[key]++
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		if u.streams[key]--; u.streams[key] <= 0 {
			delete(u.streams, key)
		}
		u.used[key] = time.Now()
		u.mu.Unlock()
	}
}

// take returns the uses to write back and forgets them; a record with an
// open stream is in use now.
func (u *usage) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.used
	u.used = make(map[string]time.Time, len(out))
	now := time.Now()
	for k := range u.streams {
		out[k] = now
	}
	return out
}

// lastUse is when this gateway last saw the record of key in use (now
// while it has a stream open), zero when it has nothing newer than the
// record itself.
func (u *usage) lastUse(key string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.streams[key] > 0 {
		return time.Now()
	}
	return u.used[key]
}
