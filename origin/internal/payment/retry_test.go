package payment

import (
	"context"
	"errors"
	"testing"
	"time"
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
	if err := Retry(ctx, 3, time.Microsecond, try); err != nil || *n != 3 {
		t.Errorf("down, down, ok = %v after %d tries, want nil after 3", err, *n)
	}
	try, n = tries(down)
	if err := Retry(ctx, 3, time.Microsecond, try); !errors.Is(err, down) || *n != 3 {
		t.Errorf("always down = %v after %d tries, want down after 3", err, *n)
	}
	refused := errors.New("refused")
	try, n = tries(refused)
	if err := Retry(ctx, 3, time.Microsecond, try); !errors.Is(err, refused) || *n != 1 {
		t.Errorf("refused = %v after %d tries, want refused after 1", err, *n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	try, n = tries(down)
	if err := Retry(cancelled, 3, time.Hour, try); !errors.Is(err, context.Canceled) || *n != 1 {
		t.Errorf("down, context ended = %v after %d tries, want context.Canceled after 1", err, *n)
	}
}
