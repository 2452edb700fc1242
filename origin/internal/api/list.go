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

// listSales: GET /v1/sales, the sales this origin serves (those not ended
// more than a day ago), so every edge node knows which sales exist without
// asking about made-up ids.
func (s *Server) listSales(ctx *fasthttp.RequestCtx, _ context.Context, _ []string) error {
	out := struct {
		Sales []saleListing `json:"sales"`
	}{Sales: []saleListing{}}
	cutoff := s.Clock().Add(-24 * time.Hour)
	for _, sale := range s.Catalog.All() {
		if sale.EndsAt.Before(cutoff) {
			continue
		}
		out.Sales = append(out.Sales, saleListing{SaleID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
