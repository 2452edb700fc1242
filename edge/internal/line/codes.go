package line

// The return codes of the edge's Lua scripts, in one table. Each script's
// header documents its KEYS, ARGV and returns; these are the names the Go
// readers use for them. The scripts are join, raise, restore, seal and
// settings beside this file, and package admission's advance.lua, whose
// reply cursor.go reads.
//
// "Lost" is one reply wherever it appears: every script that needs the
// sale's line whole (join, raise, seal, settings and advance) fails with an
// error reply that starts with lineLost when it finds the line not there,
// from another Redis history, or below the caller's floors, and changes
// nothing. lineErr (ScriptError, for package admission) turns it into
// ErrLost, the one place that reads it. No script answers "lost" any other
// way, and restore.lua, which ends a loss, never answers it.
const lineLost = "LINE_LOST"

// replyTrue is a flag set in a reply (0 when not): settings.lua's paused and
// join.lua's before-the-start.
const replyTrue = 1

// join.lua: one value per account (a place, as the places hash holds it, or
// joinWait), then joinTail values: the queue length, the pre counter, its
// ceiling, the post counter, its ceiling, replyTrue before the start, and
// the line's epoch (the one value that is not a number).
const (
	joinWait = "w" // no place: the counter is at its ceiling (ErrWait)
	joinTail = 7
)

// raise.lua.
const (
	raiseRaised      = 1 // every ceiling is at least the one asked for
	raiseServingLeft = 2 // the join ceilings are; the serving one was sized for replaced settings
)

// seal.lua answers the draw size Redis holds afterwards (never negative).

// restore.lua (Restore turns them into a Restored).
const (
	restoreWhole   = 0 // whole, in this history and at the floors: nothing changed
	restoreMissing = 1 // keys were gone; the line was put back
	restoreBehind  = 2 // the line had lost writes; it was raised to the durable copy
	restoreNewer   = 3 // not whole, but Redis holds newer settings: nothing changed
)

// settings.lua answers settingsValues values: {rate, paused (replyTrue or
// 0), now_serving, serving ceiling, settings version, challenge bits}.
const settingsValues = 6
