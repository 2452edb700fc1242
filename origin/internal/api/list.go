package api

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
)

type saleListing struct {
	SaleID   string    `json:"sale_id"`
	Name     string    `json:"name"`
	StartsAt time.Time `json:"starts_at"`
	EndsAt   time.Time `json:"ends_at"`
}

// listEndedFor is how long a sale stays listed after it ends: as long as
// the edge's queue tokens outlive their sale (an hour), so a shopper still
// polling hears "closed" and a late reserve "sale_closed" rather than
// "unknown_sale". Past that, no token for the sale is valid any more, and
// listing it would only make every edge fetch it on every refresh.
const listEndedFor = time.Hour

// listSales: GET /v1/sales, the current sales — not ended, or ended less
// than listEndedFor ago — so every edge node knows which sales exist
// without asking about made-up ids, and refreshes only those.
func (s *Server) listSales(ctx *fasthttp.RequestCtx, _ context.Context, _ []string) error {
	out := struct {
		Sales []saleListing `json:"sales"`
	}{Sales: []saleListing{}}
	cutoff := s.Clock.Now().Add(-listEndedFor)
	for _, sale := range s.Catalog.All() {
		if !sale.EndsAt.After(cutoff) {
			continue
		}
		out.Sales = append(out.Sales, saleListing{SaleID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
