package payment

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

// TestRetry: passing failures are tried again up to the attempts, a
// refusal or a success ends at once, and a context that ends during a pause
// ends the retries with the last failure named.
func TestRetry(t *testing.T) {
	down := errors.New("down")
	tries := func(results ...error) (func() (bool, error), *int) {
		n := 0
		return func() (bool, error) {
			err := results[min(n, len(results)-1)]
			n++
			return errors.Is(err, down), err
		}, &n
	}
	ctx := context.Background()
	try, n := tries(down, down, nil)
	if err := Retry(ctx, nil, 3, time.Microsecond, try); err != nil || *n != 3 {
		t.Errorf("down, down, ok = %v after %d tries, want nil after 3", err, *n)
	}
	try, n = tries(down)
	if err := Retry(ctx, nil, 3, time.Microsecond, try); !errors.Is(err, down) || *n != 3 {
		t.Errorf("always down = %v after %d tries, want down after 3", err, *n)
	}
	refused := errors.New("refused")
	try, n = tries(refused)
	if err := Retry(ctx, nil, 3, time.Microsecond, try); !errors.Is(err, refused) || *n != 1 {
		t.Errorf("refused = %v after %d tries, want refused after 1", err, *n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	try, n = tries(down)
	if err := Retry(cancelled, nil, 3, time.Hour, try); !errors.Is(err, context.Canceled) || *n != 1 {
		t.Errorf("down, context ended = %v after %d tries, want context.Canceled after 1", err, *n)
	}
}

// TestRetryPausesOnClock: the pauses are backoff, then twice that, on the
// clock Retry is given.
func TestRetryPausesOnClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	var tried []time.Duration // when each attempt began, after start
	armed := clk.Armed()
	done := make(chan error, 1)
	go func() {
		done <- Retry(context.Background(), clk, 3, time.Second, func() (bool, error) {
			tried = append(tried, clk.Now().Sub(start))
			return true, errors.New("down")
		})
	}()
	for _, pause := range []time.Duration{time.Second, 2 * time.Second} {
		select {
		case <-armed:
		case <-time.After(5 * time.Second):
			t.Fatalf("no pause of %v armed", pause)
		}
		armed = clk.Armed()
		clk.Advance(pause - time.Millisecond)
		if clk.Waiting() != 1 {
			t.Fatalf("the pause of %v ended %v early", pause, time.Millisecond)
		}
		clk.Advance(time.Millisecond)
	}
	if err := <-done; err == nil {
		t.Fatal("always down = nil, want the last failure")
	}
	if want := []time.Duration{0, time.Second, 3 * time.Second}; !slices.Equal(tried, want) {
		t.Errorf("attempts at %v, want %v", tried, want)
	}
}
