package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// URLGrantPrefix starts the grant of a URL pattern ("url:intranet.example"):
// approving it for the session adds the pattern to the session tier of the
// browser session's URL policy.
const URLGrantPrefix = "url:"

// urlsKey holds the URL patterns granted to one browser session, so that
// every call can send the whole session tier.
func urlsKey(scopeKey string) string {
	sum := sha256.Sum256([]byte(scopeKey))
	return "urls." + hex.EncodeToString(sum[:])
}

// URLGrants returns the URL patterns granted to the browser session of
// scopeKey, oldest first.
func (q *Queue) URLGrants(ctx context.Context, scopeKey string) ([]string, error) {
	if scopeKey == "" {
		return nil, nil
	}
	e, err := q.kv.Get(ctx, urlsKey(scopeKey))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read URL grants: %w", err)
	}
	var list []string
	if err := json.Unmarshal(e.Value(), &list); err != nil {
		return nil, fmt.Errorf("decode URL grants: %w", err)
	}
	return list, nil
}

// addURLGrant records pattern among the session's URL grants (a
// compare-and-set loop: concurrent grants on several replicas all stay).
func (q *Queue) addURLGrant(ctx context.Context, scopeKey, pattern string) error {
	k := urlsKey(scopeKey)
	for range 8 {
		var list []string
		var rev uint64
		e, err := q.kv.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read URL grants: %w", err)
		default:
			rev = e.Revision()
			if err := json.Unmarshal(e.Value(), &list); err != nil {
				return fmt.Errorf("decode URL grants: %w", err)
			}
		}
		if slices.Contains(list, pattern) {
			return nil
		}
		data, _ := json.Marshal(append(list, pattern))
		if rev == 0 {
			_, err = q.kv.Create(ctx, k, data)
		} else {
			_, err = q.kv.Update(ctx, k, data, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("store URL grant: %w", err)
		}
	}
	return errors.New("store URL grant: too many concurrent updates")
}

// urlPattern returns the pattern a grant names, when it is a URL grant.
func urlPattern(grant string) (string, bool) {
	p, ok := strings.CutPrefix(grant, URLGrantPrefix)
	return p, ok && p != ""
}
