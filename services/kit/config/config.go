// Package config reads settings from flags with environment fallbacks.
package config

import (
	"fmt"
	"os"
	"strconv"
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
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration (like 30s or 5m)", name, v)
	}
	return d, nil
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
