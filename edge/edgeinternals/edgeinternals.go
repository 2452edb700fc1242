// Package edgeinternals opens the edge's internals to the benchmarks under
// bench/, which Go's internal rule keeps out of edge/internal: they measure
// the real edge node (app.App and its handlers) and the real queue, not
// copies of them. Only bench/ imports it.
package edgeinternals

import (
	"github.com/flashgate/flashgate/edge/internal/app"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// The edge's types under names bench/ can reach.
type (
	App           = app.App
	Config        = app.Config
	Joiner        = line.Joiner
	JoinerOptions = line.JoinerOptions
	Keys          = line.Keys
	Place         = line.Place
	Shuffle       = line.Shuffle
)

// ErrWait is the Joiner's answer while a line is at its durable ceiling.
var ErrWait = line.ErrWait

// The edge's constructors.
var (
	NewApp        = app.New
	DefaultConfig = app.DefaultConfig
	NewJoiner     = line.NewJoiner
	NewKeys       = line.NewKeys
	NewShuffle    = line.NewShuffle
)
