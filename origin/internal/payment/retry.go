package payment

import (
	"context"
	"fmt"
	"time"

	"github.com/flashgate/flashgate/internal/clock"
)

// Retry calls try up to attempts times while it fails with a failure worth
// another (retry true: the provider down, a 5xx or a 429), pausing backoff
// before the second attempt and twice as long before each one after, and
// returns the last error. The pauses are on c (nil: clock.Real). If ctx ends
// during a pause it returns ctx's error with the last failure. Every call
// that changes something carries an idempotency key, so a retry never pays
// or refunds twice.
func Retry(ctx context.Context, c clock.Clock, attempts int, backoff time.Duration, try func() (retry bool, err error)) error {
	pause := backoff
	for attempt := 1; ; attempt++ {
		retry, err := try()
		if err == nil || !retry || attempt >= attempts {
			return err
		}
		t := clock.Or(c).NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
		pause *= 2
	}
}
