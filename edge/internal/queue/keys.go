package queue

// Keys names every Redis key this package touches. All keys of one sale's
// queue share the hash tag {q:<sale>}, so one script may touch them all.
//
//	<prefix>{q:<sale>}:pre      string  pre-queue size: joins before the start
//	<prefix>{q:<sale>}:post     string  joins after the start
//	<prefix>{q:<sale>}:places   hash    account -> "p<i>" (i-th pre-queue join) or "<position>"
//	<prefix>{q:<sale>}:seed     string  the pre-queue shuffle seed (hex), set once
//	<prefix>{q:<sale>}:cursor   hash    now_serving, last_ms (admitted up to), rate, paused
//
// A shopper costs one field of the places hash and nothing else.
type Keys struct {
	prefix string
}

// NewKeys returns the key schema under prefix (for example "fg:").
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

func (k Keys) sale(sale string) string { return k.prefix + "{q:" + sale + "}:" }

// Pre counts pre-queue joins.
func (k Keys) Pre(sale string) string { return k.sale(sale) + "pre" }

// Post counts joins after the start.
func (k Keys) Post(sale string) string { return k.sale(sale) + "post" }

// Places maps accounts to their place in line.
func (k Keys) Places(sale string) string { return k.sale(sale) + "places" }

// Seed holds the shuffle seed of the pre-queue.
func (k Keys) Seed(sale string) string { return k.sale(sale) + "seed" }

// Cursor is the admission cursor with its rate and pause switch.
func (k Keys) Cursor(sale string) string { return k.sale(sale) + "cursor" }
