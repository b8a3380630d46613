package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLifetime(t *testing.T) {
	t.Parallel()
	t.Run("StopEndsRun", func(t *testing.T) {
		var l Lifetime
		done := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			done <- l.Run(context.Background(), func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				return nil
			})
		}()
		<-started
		if err := l.Stop(context.Background()); err != nil {
			t.Fatalf("Stop() = %v, want nil", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
		default:
			t.Fatal("Stop returned before Run")
		}
	})
	t.Run("StopBeforeRun", func(t *testing.T) {
		var l Lifetime
		if err := l.Stop(context.Background()); err != nil {
			t.Fatalf("Stop() = %v, want nil", err)
		}
		called := false
		if err := l.Run(context.Background(), func(context.Context) error { called = true; return nil }); err != nil || called {
			t.Fatalf("Run after Stop = %v (run called: %v), want nil and not called", err, called)
		}
	})
	t.Run("StopTimesOut", func(t *testing.T) {
		var l Lifetime
		started, release := make(chan struct{}), make(chan struct{})
		go func() {
			_ = l.Run(context.Background(), func(context.Context) error { close(started); <-release; return nil })
		}()
		<-started
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if err := l.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop() = %v, want %v", err, context.DeadlineExceeded)
		}
	})
	t.Run("SecondRun", func(t *testing.T) {
		var l Lifetime
		started := make(chan struct{})
		go func() {
			_ = l.Run(context.Background(), func(ctx context.Context) error { close(started); <-ctx.Done(); return nil })
		}()
		<-started
		defer func() { _ = l.Stop(context.Background()) }()
		if err := l.Run(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Run() = %v, want %v", err, ErrRunning)
		}
	})
}
