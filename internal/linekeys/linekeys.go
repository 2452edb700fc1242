// Package linekeys names the Redis keys of a sale's line: the edges keep
// the line (edge/internal/line, whose keys.go documents every key), and
// the origin's admission controller reads how far the cursor went. One
// schema, named in one place, so the two binaries cannot drift apart.
package linekeys

// All keys of one sale's line share the hash tag {q:<sale>}, so one script
// may touch them all (and, in a Redis Cluster, they live on one node).
func sale(prefix, sale string) string { return prefix + "{q:" + sale + "}:" }

// Pre counts pre-queue joins.
func Pre(prefix, s string) string { return sale(prefix, s) + "pre" }

// Post counts joins after the start.
func Post(prefix, s string) string { return sale(prefix, s) + "post" }

// Places maps accounts to their place in line.
func Places(prefix, s string) string { return sale(prefix, s) + "places" }

// Seed holds the shuffle seed of the pre-queue.
func Seed(prefix, s string) string { return sale(prefix, s) + "seed" }

// Cursor is the admission cursor with its rate and pause switch.
func Cursor(prefix, s string) string { return sale(prefix, s) + "cursor" }

// Steps records the admission cursor's moves, for the admission log.
func Steps(prefix, s string) string { return sale(prefix, s) + "steps" }

// Line holds the line's durable ceilings, draw size and restore epoch.
func Line(prefix, s string) string { return sale(prefix, s) + "line" }

// Fields of the cursor hash that the origin reads too.
const (
	CursorNowServing = "now_serving" // positions up to this one are admitted
	CursorHeldMs     = "held_ms"     // when an edge last held admission, the checkout congested (unix ms)
)
