package checkout

// The return codes of the Lua scripts beside this file, in one table. Each
// script's header documents its KEYS, ARGV and returns; these are the names
// the Go readers use for them.
//
// A code means one thing wherever it appears: codeRebuilding is "the sale is
// being rebuilt from Postgres: nothing changed, try again shortly" in every
// script that checks the rebuilding flag (reserve, extend, pay, payfail and
// release), and no script uses it for anything else.
const codeRebuilding = -1

// reserve.lua: the first element of its reply (see Outcome for the meaning).
const (
	reserveCreated      = 1
	reserveExisting     = 2
	reserveLimitReached = 3
	reserveUnknownSKU   = 4
	reserveSoldOut      = 5
	reserveHoldLimit    = 6
)

// release.lua.
const (
	releaseNotHeld  = 0 // not held any more; dropped from the holds index
	releaseReleased = 1
	releaseNotDue   = 2 // held, but its expiry was extended
)

// cancel.lua.
const (
	cancelNotHeld   = 0
	cancelCancelled = 1
)

// extend.lua: the first element of its reply.
const (
	extendNotHeld = 0 // the third element says what it is instead
	extendNow     = 1
	extendBefore  = 2
)

// pay.lua.
const (
	payNotHeld = 0 // expired or cancelled: the money must go back
	payNow     = 1
	payBefore  = 2
	payUnknown = -2 // Redis does not know the reservation; Postgres must say
)

// payfail.lua.
const (
	payFailNotHeld  = 0
	payFailReleased = 1
)

// lease.lua (the Lease constants name them for callers).
const (
	leaseHeldByOther = 0
	leaseRenewed     = 1
	leaseTaken       = 2
)

// unlease.lua.
const (
	unleaseNotHeld = 0
	unleaseGivenUp = 1
)

// load.lua: the first element of its reply.
const (
	loadMismatch = 0 // the second element is the 1-based index of the SKU
	loadDone     = 1
)
