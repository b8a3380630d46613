// Package config reads settings from flags with environment fallbacks.
package config

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env returns the value of the environment variable name, or def when it is
// unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// EnvInt is [Env] for integers; a malformed value is an error naming the
// variable.
func EnvInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a whole number", name, v)
	}
	return n, nil
}

// EnvDuration is [Env] for durations ("30s", "5m").
func EnvDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration (like 30s, 5m or 90d)", name, v)
	}
	return d, nil
}

// ParseDuration is [time.ParseDuration] that also takes whole days as a
// leading "<n>d" ("90d", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("time: invalid duration %q", s)
	}
	return d + r, nil
}

// durationValue is a flag.Value parsed by [ParseDuration].
type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (like 30s, 5m or 90d)")
	}
	*v.p = d
	return nil
}

// DurationVar is [flag.FlagSet.DurationVar] that also takes days.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage)
}

// MustInt and MustDuration are for flag defaults: they return def and record
// a bad value in errs, so that all bad values are reported together.
func MustInt(errs *[]error, name string, def int) int {
	n, err := EnvInt(name, def)
	if err != nil {
		*errs = append(*errs, err)
		return def
	}
	return n
}

// MustDuration is [MustInt] for durations.
func MustDuration(errs *[]error, name string, def time.Duration) time.Duration {
	d, err := EnvDuration(name, def)
	if err != nil {
		*errs = append(*errs, err)
		return def
	}
	return d
}

// MustBool is [MustInt] for booleans (true/false, 1/0, t/f): unset is def.
func MustBool(errs *[]error, name string, def bool) bool {
	v := Env(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s=%q is not true or false", name, v))
		return def
	}
	return b
}

// MaxJetStreamReplicas is the most replicas NATS allows for a stream or
// bucket.
const MaxJetStreamReplicas = 5

// JetStreamReplicas is how many copies a clustered NATS keeps of every
// stream and KV bucket a Sovereign service creates (the audit stream,
// tokens, secrets, approvals, sessions): SOVEREIGN_NATS_REPLICAS, default 1
// (one NATS server). A cluster of three wants 3, so that losing a server
// loses nothing. Out-of-range or malformed values fall back to 1; services
// check the variable at start with [CheckJetStreamReplicas].
func JetStreamReplicas() int {
	n, err := EnvInt("SOVEREIGN_NATS_REPLICAS", 1)
	if err != nil || n < 1 || n > MaxJetStreamReplicas {
		return 1
	}
	return n
}

// CheckJetStreamReplicas reports a malformed or out-of-range
// SOVEREIGN_NATS_REPLICAS.
func CheckJetStreamReplicas() error {
	n, err := EnvInt("SOVEREIGN_NATS_REPLICAS", 1)
	if err != nil {
		return err
	}
	if n < 1 || n > MaxJetStreamReplicas {
		return fmt.Errorf("SOVEREIGN_NATS_REPLICAS=%d: must be 1 to %d (and at most the NATS cluster's size)", n, MaxJetStreamReplicas)
	}
	return nil
}
