package kittest

import (
	"context"
	"testing"
	"time"
)

// Service is the service contract of kit/app (app.Service): Run serves
// until ctx ends or Close is called, and Close stops Run and releases the
// rest.
type Service interface {
	Run(ctx context.Context) error
	Close(ctx context.Context) error
}

// stopTimeout bounds the Close of a service a test started, as
// app.CloseTimeout bounds it in a service's own binary.
const stopTimeout = 30 * time.Second

// RunService runs s on a goroutine of its own until the test ends, then
// closes it as the service's binary would: Close, then a wait for Run to
// return. An error of either fails the test. Waiting for the service to
// be ready is the caller's part (a Ready channel, a ping).
func RunService(tb testing.TB, s Service) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("close %T: %v", s, err)
		}
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("run %T: %v", s, err)
			}
		case <-ctx.Done():
			tb.Errorf("%T: Run did not return within %s of Close", s, stopTimeout)
		}
	})
}
