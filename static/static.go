// Package static holds the shopper's sale page: plain HTML, JavaScript and CSS with no build step and
// no external resources, embedded so the edge binary serves it (index.html at "/", the rest under
// "/static/") without any file on disk. challenge-worker.js is the Web Worker that solves the edge's
// proof-of-work challenge (edge/internal/challenge) for app.js.
package static

import (
	"embed"
	"io/fs"
)

// Files is the embedded sale page; the files sit at the root of the FS.
//
//go:embed index.html app.js challenge-worker.js style.css
var Files embed.FS

// Names lists the embedded file names, sorted, so tests can check that each one is served.
func Names() []string {
	entries, err := fs.ReadDir(Files, ".")
	if err != nil { // cannot happen for an embed.FS root; keep the signature simple for callers
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
