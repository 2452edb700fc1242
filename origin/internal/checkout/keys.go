package checkout

// Keys names every Redis key this package touches. All keys of one sale share
// the hash tag {s:<sale>}, so they live in one slot and a script may touch
// any of them, on a single node or on Redis Cluster alike.
//
//	<prefix>{s:<sale>}:inv:<sku>            hash    available, held, sold, total
//	<prefix>{s:<sale>}:acct:<account>       hash    res (the live reservation), state (held|paid),
//	                                                holds (how many holds it has taken in the sale),
//	                                                t:<jti> and i:<idempotency key> -> reservation id
//	                                                (burned admission tokens, idempotency keys)
//	<prefix>{s:<sale>}:res:<reservation>    hash    account, sku, status, expires_ms, created_ms, idem,
//	                                                jti, epoch, seq (where the reserve was numbered),
//	                                                order (once a payment starts), extended (grace given)
//	<prefix>{s:<sale>}:meta                 hash    epoch (written by load and rebuild, recorded in
//	                                                Postgres), seq (reserves granted in the epoch)
//	<prefix>{s:<sale>}:holds                zset    reservation id scored by expiry (unix ms)
//	<prefix>{s:<sale>}:intents              stream  intents for the order writer (fields: intent.Field*)
//	<prefix>{s:<sale>}:rebuilding           string  set while the sale is rebuilt from Postgres
//	<prefix>{s:<sale>}:writer               string  the order writer holding the stream's lease
//
// Sale and SKU ids are validated to a safe alphabet before they reach here;
// account ids and idempotency keys are opaque and only ever follow the tag.
//
// The hashes' field names the Go code reads and writes are the constants
// below; the Lua scripts spell the same names. The intents stream's field
// names are package intent's Field constants: intent.Parse reads them, and
// intent cannot import this package.
type Keys struct {
	prefix string
}

// NewKeys returns the key schema under prefix (for example "fg:"); tests use
// a prefix of their own so they never see each other's keys.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

func (k Keys) sale(sale string) string { return k.prefix + "{s:" + sale + "}:" }

// Inventory is the hash of one SKU's counters.
func (k Keys) Inventory(sale, sku string) string { return k.sale(sale) + "inv:" + sku }

// Account is the hash that names an account's live reservation in a sale.
func (k Keys) Account(sale, account string) string { return k.sale(sale) + "acct:" + account }

// Reservation is the hash of one reservation.
func (k Keys) Reservation(sale, id string) string { return k.sale(sale) + "res:" + id }

// Holds is the expiry index of live holds.
func (k Keys) Holds(sale string) string { return k.sale(sale) + "holds" }

// Intents is the sale's intents stream.
func (k Keys) Intents(sale string) string { return k.sale(sale) + "intents" }

// Rebuilding is set while the sale's Redis state is rebuilt from Postgres:
// reserves answer "try again" and sweeps wait.
func (k Keys) Rebuilding(sale string) string { return k.sale(sale) + "rebuilding" }

// AccountPattern matches every account key of a sale (for SCAN in rebuilds).
func (k Keys) AccountPattern(sale string) string { return k.sale(sale) + "acct:*" }

// Meta holds the sale's epoch in this Redis and the sequence of reserves
// granted in it: how an origin tells a Redis that lost the sale's state.
func (k Keys) Meta(sale string) string { return k.sale(sale) + "meta" }

// WriterLease names the order writer that alone reads the intents stream.
func (k Keys) WriterLease(sale string) string { return k.sale(sale) + "writer" }

// Fields of a reservation hash (Keys.Reservation).
const (
	resAccount   = "account"
	resSKU       = "sku"
	resStatus    = "status" // an intent.Status
	resExpiresMs = "expires_ms"
	resCreatedMs = "created_ms"
	resIdem      = "idem"     // the reserve's idempotency key
	resJTI       = "jti"      // the admission token the reserve burned
	resEpoch     = "epoch"    // the epoch the reserve was numbered in
	resSeq       = "seq"      // its number in that epoch
	resOrder     = "order"    // the order, once a payment has started
	resExtended  = "extended" // "1" once the payment grace was given
)

// Fields of an account hash (Keys.Account).
const (
	acctRes   = "res"   // the account's live reservation
	acctState = "state" // its status: held or paid
	acctHolds = "holds" // how many holds the account has taken in the sale
	// acctTokenPrefix and acctIdemPrefix start the fields that map a burned
	// admission token (by jti) or an idempotency key to its reservation.
	acctTokenPrefix = "t:"
	acctIdemPrefix  = "i:"
)

// Fields of an inventory hash (Keys.Inventory): an intent.Stock.
const (
	invTotal     = "total"
	invAvailable = "available"
	invHeld      = "held"
	invSold      = "sold"
	// invFirstZeroMs and invZeroMs are when the scripts first and last
	// took available to 0, invBackMs when they last brought it from 0 to 1
	// (unix ms, Redis's clock).
	invFirstZeroMs = "first_zero_ms"
	invZeroMs      = "zero_ms"
	invBackMs      = "back_ms"
)

// Fields of a sale's meta hash (Keys.Meta).
const (
	metaEpoch = "epoch" // the sale's epoch in this Redis
	metaSeq   = "seq"   // reserves granted in it
)
