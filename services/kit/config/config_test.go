package config

import (
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	t.Setenv("SOV_TEST_S", "")
	if got := Env("SOV_TEST_S", "def"); got != "def" {
		t.Errorf("Env(empty) = %q, want def", got)
	}
	t.Setenv("SOV_TEST_S", "x")
	if got := Env("SOV_TEST_S", "def"); got != "x" {
		t.Errorf("Env(x) = %q, want x", got)
	}
}

func TestMust(t *testing.T) {
	var errs []error
	t.Setenv("SOV_TEST_N", "12")
	t.Setenv("SOV_TEST_BAD_N", "twelve")
	t.Setenv("SOV_TEST_D", "1m")
	t.Setenv("SOV_TEST_BAD_D", "soon")
	if got := MustInt(&errs, "SOV_TEST_N", 3); got != 12 {
		t.Errorf("MustInt(12) = %d", got)
	}
	if got := MustInt(&errs, "SOV_TEST_BAD_N", 3); got != 3 {
		t.Errorf("MustInt(bad) = %d, want the default", got)
	}
	if got := MustDuration(&errs, "SOV_TEST_D", time.Second); got != time.Minute {
		t.Errorf("MustDuration(1m) = %s", got)
	}
	if got := MustDuration(&errs, "SOV_TEST_BAD_D", time.Second); got != time.Second {
		t.Errorf("MustDuration(bad) = %s, want the default", got)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `SOV_TEST_BAD_N="twelve" is not a whole number`) ||
		!strings.Contains(errs[1].Error(), `SOV_TEST_BAD_D="soon" is not a duration`) {
		t.Fatalf("errors = %v, want one per bad variable, naming it", errs)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90d": 90 * 24 * time.Hour, "1d12h": 36 * time.Hour, "30s": 30 * time.Second, "0d": 0,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"d", "xd", "-1d", "1d-1h", "1dh", "ninety"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}

func TestMustBool(t *testing.T) {
	var errs []error
	t.Setenv("SOVEREIGN_T_ON", "true")
	t.Setenv("SOVEREIGN_T_BAD", "maybe")
	if !MustBool(&errs, "SOVEREIGN_T_ON", false) || !MustBool(&errs, "SOVEREIGN_T_UNSET", true) || MustBool(&errs, "SOVEREIGN_T_UNSET", false) {
		t.Error("MustBool read the wrong values")
	}
	if MustBool(&errs, "SOVEREIGN_T_BAD", false) || len(errs) != 1 || !strings.Contains(errs[0].Error(), `SOVEREIGN_T_BAD="maybe"`) {
		t.Errorf("a bad value: %v", errs)
	}
}

func TestJetStreamReplicas(t *testing.T) {
	for v, want := range map[string]int{"": 1, "1": 1, "3": 3, "5": 5, "0": 1, "7": 1, "three": 1} {
		t.Setenv("SOVEREIGN_NATS_REPLICAS", v)
		if got := JetStreamReplicas(); got != want {
			t.Errorf("SOVEREIGN_NATS_REPLICAS=%q: %d, want %d", v, got, want)
		}
		err := CheckJetStreamReplicas()
		if bad := v == "0" || v == "7" || v == "three"; bad != (err != nil) {
			t.Errorf("SOVEREIGN_NATS_REPLICAS=%q: check %v", v, err)
		}
	}
}
