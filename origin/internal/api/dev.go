package api

import (
	"context"

	"github.com/valyala/fasthttp"
)

// devAdmissionToken: POST /admin/dev/admission-token {"sale_id","user_id"},
// dev mode only, so the origin can be exercised without the edge.
func (s *Server) devAdmissionToken(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	var body struct {
		SaleID string `json:"sale_id"`
		UserID string `json:"user_id"`
	}
	if err := decodeJSON(ctx, s.opts.MaxAdminBody, &body); err != nil {
		return err
	}
	if !idPattern.MatchString(body.SaleID) {
		return fail(fasthttp.StatusBadRequest, "invalid_sale_id", "sale_id must be 1 to 64 letters, digits, '_' or '-'.")
	}
	if !validOpaque(body.UserID) {
		return fail(fasthttp.StatusBadRequest, "invalid_user_id", "user_id must be 1 to 128 printable characters without spaces.")
	}
	if _, err := s.Catalog.Get(c, body.SaleID); err != nil {
		return saleError(err)
	}
	token, _, err := s.Issuer.Admission(body.SaleID, body.UserID, 0)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"admission_token": token})
	return nil
}
