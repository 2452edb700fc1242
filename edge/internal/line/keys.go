package line

import "github.com/flashgate/flashgate/internal/linekeys"

// Keys names every Redis key this package touches (internal/linekeys spells
// them: the origin reads some too). All keys of one sale's queue share the
// hash tag {q:<sale>}, so one script may touch them all.
//
//	<prefix>{q:<sale>}:pre      string  pre-queue size: joins before the start
//	<prefix>{q:<sale>}:post     string  joins after the start
//	<prefix>{q:<sale>}:places   hash    account -> "p<i>" (i-th pre-queue join) or "<position>"
//	<prefix>{q:<sale>}:seed     string  the pre-queue shuffle seed (hex), from the origin's copy
//	<prefix>{q:<sale>}:cursor   hash    now_serving, last_ms (admitted up to), rate, paused,
//	                                    challenge_bits, settings_version (of the origin's
//	                                    copy); created only
//	                                    by restore.lua, then advanced by package admission's
//	                                    advance.lua and changed by settings.lua; advance.lua
//	                                    also keeps the checkout's answer rate there: answered,
//	                                    answered_ms, answered_then, answer_rate (not durable: a
//	                                    restored line samples it anew); settings.lua records a
//	                                    resume's or a raise's ramp there: ramp_ms, ramp_from;
//	                                    advance.lua records when a node last held admission,
//	                                    the checkout congested: held_ms (the origin's
//	                                    admission controller reads it and now_serving)
//	<prefix>{q:<sale>}:steps    list    the admission cursor's moves, oldest first, each
//	                                    "<unix ms>:<now_serving>" (Redis TIME, the value it
//	                                    moved to): package admission's advance.lua appends one
//	                                    each time it moves now_serving, until the list holds
//	                                    admission.MaxSteps (later moves go unrecorded); the
//	                                    admission log's reached_at is read from it
//	<prefix>{q:<sale>}:line     hash    epoch and restored_ms (set by the restore that put
//	                                    the line here: its name and Redis TIME),
//	                                    pre_ceiling, post_ceiling, serving_ceiling (durable
//	                                    high-water marks: pre, post and now_serving never pass
//	                                    them), draw_size (the pre-queue the draw permutes, set
//	                                    once after the start), replid (the Redis history the
//	                                    line is good in: INFO replication's master_replid)
//
// A shopper costs one field of the places hash and nothing else.
//
// The hashes' field names the Go code reads and writes are the constants
// below; the Lua scripts (here and package admission's advance.lua) spell
// the same names.
//
// The origin keeps a durable copy of the line (its /v1/lines routes): the
// seed, rate, pause and the ceilings, each written there before here. The
// line is whole when the line hash has its epoch, the cursor its rate, and
// the counters and seed exist (the restore writes them all, zeros
// included); every script that hands out or admits checks that first and
// fails with LINE_LOST otherwise, so a Redis that lost the line never
// starts it again from zero. They fail the same way on a line from another
// Redis history (replid is not this Redis's: a replica that may have lagged
// was promoted, or a restart reloaded an older file), and the cursor on a
// line holding less than the node read before: Redis lost writes, and the
// restore raises the line to the origin's copy.
type Keys struct {
	prefix string
}

// NewKeys returns the key schema under prefix (for example "fg:").
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Pre counts pre-queue joins.
func (k Keys) Pre(sale string) string { return linekeys.Pre(k.prefix, sale) }

// Post counts joins after the start.
func (k Keys) Post(sale string) string { return linekeys.Post(k.prefix, sale) }

// Places maps accounts to their place in line.
func (k Keys) Places(sale string) string { return linekeys.Places(k.prefix, sale) }

// Seed holds the shuffle seed of the pre-queue.
func (k Keys) Seed(sale string) string { return linekeys.Seed(k.prefix, sale) }

// Cursor is the admission cursor with its rate and pause switch.
func (k Keys) Cursor(sale string) string { return linekeys.Cursor(k.prefix, sale) }

// Steps records the admission cursor's moves, for the admission log.
func (k Keys) Steps(sale string) string { return linekeys.Steps(k.prefix, sale) }

// Line holds the line's durable ceilings, draw size and restore epoch.
func (k Keys) Line(sale string) string { return linekeys.Line(k.prefix, sale) }

// Fields of the cursor hash (Keys.Cursor).
const (
	CursorNowServing      = linekeys.CursorNowServing // positions up to this one are admitted
	CursorLastMs          = "last_ms"                 // the instant admitted up to (unix ms, fractional)
	CursorRate            = "rate"                    // admissions per second
	CursorPaused          = "paused"                  // "1" paused, "0" not
	CursorChallengeBits   = "challenge_bits"          // the proof of work a join needs, in leading zero bits
	CursorSettingsVersion = "settings_version"        // of the origin's copy the rate and pause came from
	CursorAnswered        = "answered"                // reserves the edges saw the checkout answer, in all
	CursorAnsweredMs      = "answered_ms"             // when the answer rate was last sampled (unix ms)
	CursorAnsweredThen    = "answered_then"           // the answered count then
	CursorAnswerRate      = "answer_rate"             // answers per second between the last two samples
	CursorRampMs          = "ramp_ms"                 // when the last resume or raised rate started a ramp (unix ms)
	CursorRampFrom        = "ramp_from"               // the rate that ramp rises from: 0 after a resume, the old rate after a raise
	CursorHeldMs          = linekeys.CursorHeldMs     // when a node last held admission, the checkout congested (unix ms)
)

// Fields of the line hash (Keys.Line).
const (
	LineEpoch          = "epoch"       // set by the restore that put the line here
	LineRestoredMs     = "restored_ms" // when it did (unix ms, Redis TIME)
	LinePreCeiling     = "pre_ceiling"
	LinePostCeiling    = "post_ceiling"
	LineServingCeiling = "serving_ceiling"
	LineDrawSize       = "draw_size" // the pre-queue the draw permutes, once sealed
	LineReplID         = "replid"    // the Redis history the line is good in
)

// placePre starts a places hash value that is a pre-queue index ("p<i>");
// any other value is a position.
const placePre = "p"
