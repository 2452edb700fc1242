// Package roster keeps the list of edge nodes in the Redis they share, for
// the ops dashboard: every node writes its state there every second (Beat)
// and any node reads everyone's (Nodes), aged by Redis's own clock so that
// nodes whose clocks disagree still agree on who went silent.
//
// Key (one hash, shared by every sale and node):
//
//	<prefix>nodes   hash   node id -> "<Redis ms when written> <State as JSON>"
//
// A node silent for Forget is dropped by the next Beat of any node.
// Losing the key loses nothing: every live node writes itself back within
// a second.
package roster

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Forget is how long a silent node stays on the roster: long enough for
// ops to see that it went silent, short enough that nodes replaced in a
// deploy do not pile up.
const Forget = 10 * time.Minute

// State is what a node says of itself.
type State struct {
	Ready    bool `json:"ready"`
	OriginOK bool `json:"origin_ok"` // its list of the origin's sales is current
	RedisOK  bool `json:"redis_ok"`  // its last good tick is recent
}

// Node is one node on the roster.
type Node struct {
	ID    string
	State State
	// Age is how long ago, by Redis's clock, the node last wrote itself.
	Age time.Duration
}

// Roster is one node's handle on the roster.
type Roster struct {
	rdb   redis.UniversalClient
	key   string
	id    string
	state func() State
}

// New returns the roster under prefix (for example "fg:") for node id,
// whose state is read from state on every Beat.
func New(rdb redis.UniversalClient, prefix, id string, state func() State) *Roster {
	return &Roster{rdb: rdb, key: prefix + "nodes", id: id, state: state}
}

// ID is this node's id on the roster.
func (r *Roster) ID() string { return r.id }

//go:embed beat.lua
var beatLua string

var beatScript = redis.NewScript(beatLua)

// Beat writes this node's state, and drops nodes silent for Forget.
func (r *Roster) Beat(ctx context.Context) error {
	b, err := json.Marshal(r.state())
	if err != nil {
		return err
	}
	if err := beatScript.Run(ctx, r.rdb, []string{r.key}, r.id, string(b), Forget.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("roster: beat: %w", err)
	}
	return nil
}

//go:embed nodes.lua
var nodesLua string

var nodesScript = redis.NewScript(nodesLua)

// Nodes reads the roster, sorted by id.
func (r *Roster) Nodes(ctx context.Context) ([]Node, error) {
	res, err := nodesScript.Run(ctx, r.rdb, []string{r.key}).Slice()
	if err != nil {
		return nil, fmt.Errorf("roster: read: %w", err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("roster: read: no answer")
	}
	now, ok := res[0].(int64)
	if !ok {
		return nil, fmt.Errorf("roster: read: Redis time %v", res[0])
	}
	var out []Node
	for i := 1; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		v, _ := res[i+1].(string)
		at, state, ok := strings.Cut(v, " ")
		ms, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			continue // not written by Beat: ignored, and aged out by none
		}
		n := Node{ID: id, Age: time.Duration(max(now-ms, 0)) * time.Millisecond}
		if err := json.Unmarshal([]byte(state), &n.State); err != nil {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
