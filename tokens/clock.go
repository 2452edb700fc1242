package tokens

import "time"

// Clock is the time tokens are issued, checked and signed at. The
// repository's one clock type (internal/clock) and its fake satisfy it.
type Clock interface{ Now() time.Time }

// nowOf is c's Now, or the machine's for nil.
func nowOf(c Clock) func() time.Time {
	if c == nil {
		return time.Now
	}
	return c.Now
}
