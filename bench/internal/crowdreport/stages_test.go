package crowdreport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/bench/internal/crowdsim"
)

// withStages is fabricated() with the stages a run reads from its own
// recorder and the services' histograms; the service rows come first in
// the slice, to show the report puts the client's first.
func withStages() Runs {
	runs := fabricated()
	runs.Flashgate.Stages = []crowdsim.Stage{
		{Path: "reserve", Name: "edge: reserve handler", Source: `flashgate_edge_request_seconds{route="reserve"}`, Count: 3000, P50Ms: 0.41, P99Ms: 2.2},
		{Path: "reserve", Name: "edge: wait for an origin connection", Source: `flashgate_edge_origin_wait_seconds{upstream="origin"}`, Count: 1000, P50Ms: 0.05, P99Ms: 12.5},
		{Path: "reserve", Name: "client: reserve", Source: "client", Count: 3000, P50Ms: 4, P99Ms: 45},
		{Path: "reserve", Name: "origin: Redis reserve script (its pipeline's round trip)", Source: `flashgate_origin_redis_script_seconds{script="reserve"}`, Count: 1000, P50Ms: 0.8, P99Ms: 3.1},
		{Path: "order", Name: "client: order_create", Source: "client", Count: 800, P50Ms: 9, P99Ms: 60},
		{Path: "order", Name: "origin: gateway create_intent", Source: `flashgate_origin_gateway_seconds{call="create_intent"}`, Count: 0},
		{Path: "join", Name: "client: join", Source: "client", Count: 50000, P50Ms: 2.5, P99Ms: 30},
		{Path: "join", Name: "edge: join handler", Source: `flashgate_edge_request_seconds{route="join"}`, Count: 50000, P50Ms: 0.12, P99Ms: 1.9},
	}
	return runs
}

func TestMarkdownStages(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, withStages(), nil); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	md := b.String()
	for _, want := range []string{
		"## Where a request's time goes",
		"queueing before the handler runs",
		"the connection and the origin's scheduling",
		"### reserve (flashgate)\n\n| stage | count | p50 ms | p99 ms |\n| --- | --- | --- | --- |\n" +
			"| client: reserve | 3,000 | 4.00 | 45.00 |\n" +
			"| edge: reserve handler | 3,000 | 0.41 | 2.20 |\n" +
			"| edge: wait for an origin connection | 1,000 | 0.05 | 12.50 |\n",
		"| origin: gateway create_intent | 0 | — | — |", // no observations: no quantiles
		"### join (flashgate)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// Paths in their order, and the section after the endpoints.
	order := []string{"## Endpoints", "## Where a request's time goes", "### reserve", "### order", "### join", "## Fates"}
	at := 0
	for _, h := range order {
		i := strings.Index(md[at:], h)
		if i < 0 {
			t.Errorf("Markdown has %q out of order (want %v)", h, order)
			break
		}
		at += i
	}
	if strings.Contains(md, "### status") || strings.Contains(md, "(naive)") {
		t.Error("Markdown has a stages table for a path or run without stages")
	}
	if t.Failed() {
		t.Log(md)
	}
}

// A run without stages (an older result, or neither tier's /metrics read)
// has no such section.
func TestMarkdownWithoutStages(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, fabricated(), nil); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(b.String(), "Where a request's time goes") {
		t.Error("Markdown has the stages section for runs without stages")
	}
}

func TestStagesJSONRoundTrip(t *testing.T) {
	runs := withStages()
	var b bytes.Buffer
	if err := WriteJSON(&b, runs); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Runs
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(got.Flashgate.Stages, runs.Flashgate.Stages) {
		t.Errorf("stages round trip = %+v, want %+v", got.Flashgate.Stages, runs.Flashgate.Stages)
	}
}
