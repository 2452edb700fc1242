package app_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/origin/origintest"
)

// TestListSalesOnlyCurrent: GET /v1/sales, which every edge refreshes from
// a few times a second, lists the sales not ended and those ended within
// the last hour (queue tokens outlive their sale by an hour), but not the
// sales that ended before, whose snapshots no edge needs any more.
func TestListSalesOnlyCurrent(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	now := time.Now().UTC().Truncate(time.Second)
	window := func(id string, starts, ends time.Duration) origintest.Sale {
		s := origintest.OpenSale(id, 1, 600)
		s.StartsAt, s.EndsAt = now.Add(starts), now.Add(ends)
		return s
	}
	for _, s := range []origintest.Sale{
		window("upcoming", time.Hour, 2*time.Hour),
		window("open", -time.Minute, time.Hour),
		window("ended-minutes-ago", -time.Hour, -10*time.Minute),
		window("ended-hours-ago", -3*time.Hour, -2*time.Hour),
		window("ended-yesterday", -26*time.Hour, -25*time.Hour),
	} {
		o.MustCreateSale(t, s)
	}
	status, body := o.Do(t, origintest.Request{Method: "GET", Path: "/v1/sales"})
	if status != fasthttp.StatusOK {
		t.Fatalf("GET /v1/sales = %d %s, want 200", status, body)
	}
	var list struct {
		Sales []struct {
			SaleID string `json:"sale_id"`
		} `json:"sales"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /v1/sales = %s: %v", body, err)
	}
	var got []string
	for _, s := range list.Sales {
		got = append(got, s.SaleID)
	}
	sort.Strings(got)
	if want := "ended-minutes-ago,open,upcoming"; strings.Join(got, ",") != want {
		t.Errorf("GET /v1/sales lists %v, want %s", got, want)
	}
}
