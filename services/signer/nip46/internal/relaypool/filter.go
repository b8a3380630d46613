package relaypool

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sovereign-fleet/sovereign/services/signer/nostr"
)

// Filter is a NIP-01 subscription filter. A nil list places no
// condition; a non-nil empty list matches nothing. Tags maps a
// single-letter tag name ("p", "e", …) to the values wanted: on the wire
// it is the "#p", "#e" … fields.
type Filter struct {
	IDs     []string
	Authors []string
	Kinds   []int
	Tags    map[string][]string
	Since   *int64
	Until   *int64
	Limit   *int
}

// MarshalJSON encodes the filter as NIP-01 wants it, with tag conditions
// as "#<letter>" fields.
func (f Filter) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if f.IDs != nil {
		m["ids"] = f.IDs
	}
	if f.Authors != nil {
		m["authors"] = f.Authors
	}
	if f.Kinds != nil {
		m["kinds"] = f.Kinds
	}
	for k, v := range f.Tags {
		if v == nil {
			v = []string{}
		}
		m["#"+k] = v
	}
	if f.Since != nil {
		m["since"] = *f.Since
	}
	if f.Until != nil {
		m["until"] = *f.Until
	}
	if f.Limit != nil {
		m["limit"] = *f.Limit
	}
	return json.Marshal(m)
}

// UnmarshalJSON decodes a NIP-01 filter. Fields other than ids, authors,
// kinds, #<letter>, since, until and limit are refused, so that a relay
// built on it says what it does not support instead of ignoring it.
func (f *Filter) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("filter is not a JSON object: %w", err)
	}
	*f = Filter{}
	for k, raw := range m {
		var err error
		switch {
		case k == "ids":
			err = decodeList(raw, &f.IDs)
		case k == "authors":
			err = decodeList(raw, &f.Authors)
		case k == "kinds":
			err = decodeList(raw, &f.Kinds)
		case k == "since":
			f.Since = new(int64)
			err = json.Unmarshal(raw, f.Since)
		case k == "until":
			f.Until = new(int64)
			err = json.Unmarshal(raw, f.Until)
		case k == "limit":
			f.Limit = new(int)
			err = json.Unmarshal(raw, f.Limit)
		case len(k) == 2 && k[0] == '#' && isLetter(k[1]):
			var v []string
			err = decodeList(raw, &v)
			if f.Tags == nil {
				f.Tags = map[string][]string{}
			}
			f.Tags[k[1:]] = v
		default:
			return fmt.Errorf("unsupported filter field %q", k)
		}
		if err != nil {
			return fmt.Errorf("filter field %q: %w", k, err)
		}
	}
	return nil
}

// decodeList decodes a JSON array into *dst, keeping [] distinct from
// absent (non-nil empty slice).
func decodeList[T any](raw json.RawMessage, dst *[]T) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return err
	}
	if *dst == nil {
		return fmt.Errorf("want an array, got null")
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// Match reports whether the event satisfies every condition of the
// filter (Limit is not a condition: it bounds a relay's stored answer).
func (f *Filter) Match(e *nostr.Event) bool {
	if f.IDs != nil && !slices.Contains(f.IDs, e.ID) {
		return false
	}
	if f.Authors != nil && !slices.Contains(f.Authors, e.PubKey) {
		return false
	}
	if f.Kinds != nil && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	if f.Since != nil && e.CreatedAt < *f.Since {
		return false
	}
	if f.Until != nil && e.CreatedAt > *f.Until {
		return false
	}
	for name, values := range f.Tags {
		if !hasTag(e, name, values) {
			return false
		}
	}
	return true
}

// hasTag reports whether e has a tag named name whose first value is one
// of values.
func hasTag(e *nostr.Event, name string, values []string) bool {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == name && slices.Contains(values, t[1]) {
			return true
		}
	}
	return false
}
