package defence

// Keys names every Redis key this package touches. Both are shared by every
// sale and every edge node; neither is part of a sale's line.
//
//	<prefix>defences   string  the Settings as JSON, written by PUT /admin/defences
//	                           (a WATCH transaction: read, merge, version + 1)
//	<prefix>tarpit     stream  the tarpit's changes, oldest first: fields op ("catch"
//	                           or "release"), account, reason, since_ms, until_ms;
//	                           trimmed to about maxStreamLen entries
//
// Losing them loses nothing for good: every node keeps both in memory and
// writes its settings back when Redis holds older ones or none
// (Defences.Sync), and a tarpit entry lasts its hold on every node that has
// read it.
type Keys struct {
	prefix string
}

// NewKeys returns the key schema under prefix (for example "fg:").
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Settings holds the defence settings.
func (k Keys) Settings() string { return k.prefix + "defences" }

// Tarpit is the stream of the tarpit's changes.
func (k Keys) Tarpit() string { return k.prefix + "tarpit" }

// maxStreamLen bounds the tarpit stream (XADD MAXLEN ~): a node started
// later reads at most this many changes back.
const maxStreamLen = 100_000
