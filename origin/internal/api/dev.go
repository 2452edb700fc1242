package api

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
)

// devAdmissionToken: POST /admin/dev/admission-token {"sale_id","user_id"},
// dev mode only, so the origin can be exercised without the edge.
func (s *Server) devAdmissionToken(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	var body struct {
		SaleID string `json:"sale_id"`
		UserID string `json:"user_id"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxAdminBody, &body); err != nil {
		return err
	}
	if !httpapi.ValidID(body.SaleID) {
		return errInvalidSaleID
	}
	if !httpapi.ValidOpaque(body.UserID) {
		return errInvalidUserID
	}
	if _, err := s.Catalog.Get(c, body.SaleID); err != nil {
		return err
	}
	token, _, err := s.Issuer.Admission(body.SaleID, body.UserID, 0)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"admission_token": token})
	return nil
}
