package roster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/roster"
)

// Every node on one Redis sees every other, with what it last said and how
// long ago by Redis's clock; a node that stops beating ages, and one silent
// for Forget is dropped by the next beat of any node.
func TestRoster(t *testing.T) {
	ctx := context.Background()
	r := edgetest.NewRedis(t)
	state := roster.State{Ready: true, OriginOK: true, RedisOK: true}
	a := roster.New(r.Client, r.Prefix, "edge-a", func() roster.State { return state })
	b := roster.New(r.Client, r.Prefix, "edge-b", func() roster.State { return roster.State{RedisOK: true} })
	for _, n := range []*roster.Roster{a, b} {
		if err := n.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := b.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].ID != "edge-a" || nodes[0].State != state || nodes[1].ID != "edge-b" ||
		nodes[1].State != (roster.State{RedisOK: true}) || nodes[0].Age > time.Second || nodes[0].Age < 0 {
		t.Fatalf("Nodes = %+v, want edge-a (ready) and edge-b, just written", nodes)
	}
	state.OriginOK = false
	if err := a.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := b.Nodes(ctx); nodes[0].State.OriginOK {
		t.Errorf("edge-a after its beat = %+v, want origin_ok false", nodes[0])
	}

	// edge-c last beat longer ago than Forget (written as Beat writes it,
	// stamped in the past): aged, then dropped by another node's beat.
	key := r.Prefix + "nodes"
	past := time.Now().Add(-roster.Forget - time.Minute).UnixMilli()
	if err := r.Client.HSet(ctx, key, "edge-c", strconv.FormatInt(past, 10)+` {"ready":true}`, "junk", "not a beat").Err(); err != nil {
		t.Fatal(err)
	}
	nodes, err = a.Nodes(ctx)
	if err != nil || len(nodes) != 3 || nodes[2].ID != "edge-c" || nodes[2].Age < roster.Forget {
		t.Fatalf("Nodes with a silent edge-c = %+v, %v; want it aged past %v (and the junk field left out)", nodes, err, roster.Forget)
	}
	if err := b.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := a.Nodes(ctx); len(nodes) != 2 {
		t.Errorf("Nodes after a beat = %+v, want edge-c dropped", nodes)
	}
}
