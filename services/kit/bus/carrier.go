package bus

import (
	"strings"

	"github.com/nats-io/nats.go"
)

// headerCarrier adapts NATS headers to an OpenTelemetry TextMapCarrier. Keys
// are written lower-case (as W3C trace context names them) and read without
// regard to case, so peers that canonicalise header names still match.
type headerCarrier nats.Header

func (h headerCarrier) Get(key string) string {
	if v := nats.Header(h)[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (h headerCarrier) Set(key, value string) { h[strings.ToLower(key)] = []string{value} }

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}
