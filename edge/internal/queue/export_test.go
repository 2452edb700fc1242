package queue

// JoinScript is join.lua, for tests that call it with batches of their choosing.
var JoinScript = joinScript
