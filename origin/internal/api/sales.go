package api

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

type skuJSON struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	PriceMinor int64  `json:"price_minor"`
	Currency   string `json:"currency"`
	Stock      int    `json:"stock"`
}

type saleJSON struct {
	SaleID          string    `json:"sale_id"`
	Name            string    `json:"name"`
	StartsAt        time.Time `json:"starts_at"`
	EndsAt          time.Time `json:"ends_at"`
	HoldTTLSeconds  int       `json:"hold_ttl_s"`
	PerAccountLimit int       `json:"per_account_limit"`
	// OneUnitPerPayer: nil (absent) means true; always set in answers.
	OneUnitPerPayer *bool     `json:"one_unit_per_payer"`
	SKUs            []skuJSON `json:"skus"`
}

// Limits on a sale definition.
const (
	maxSKUs      = 100
	maxStock     = 10_000_000
	maxHoldTTL   = 24 * 60 * 60
	maxNameBytes = 200
)

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// validateSale checks a definition and fills in defaults: hold_ttl_s 600,
// per_account_limit 1, one_unit_per_payer true.
func validateSale(in *saleJSON) error {
	if !httpapi.ValidID(in.SaleID) {
		return errInvalidSaleID
	}
	if !validName(in.Name) {
		return badRequest(codeInvalidName, "name must be 1 to %d bytes of text without control characters.", maxNameBytes)
	}
	if in.StartsAt.IsZero() || in.EndsAt.IsZero() || !in.EndsAt.After(in.StartsAt) {
		return badRequest(codeInvalidWindow, "starts_at and ends_at are required, and ends_at must be after starts_at.")
	}
	if in.HoldTTLSeconds == 0 {
		in.HoldTTLSeconds = 600
	}
	if in.HoldTTLSeconds < 1 || in.HoldTTLSeconds > maxHoldTTL {
		return badRequest(codeInvalidHoldTTL, "hold_ttl_s must be 1 to %d seconds.", maxHoldTTL)
	}
	if in.PerAccountLimit == 0 {
		in.PerAccountLimit = 1
	}
	if in.PerAccountLimit != 1 {
		return badRequest(codeInvalidPerAccountLimit, "per_account_limit must be 1: one unit per account.")
	}
	if in.OneUnitPerPayer == nil {
		// On unless the shop says otherwise: a scalper has many accounts
		// but few bank accounts.
		in.OneUnitPerPayer = new(true)
	}
	if len(in.SKUs) == 0 || len(in.SKUs) > maxSKUs {
		return badRequest(codeInvalidSKUs, "A sale needs 1 to %d SKUs.", maxSKUs)
	}
	seen := map[string]bool{}
	for _, k := range in.SKUs {
		switch {
		case !httpapi.ValidID(k.SKU):
			return badRequest(codeInvalidSKU, "Each sku must be 1 to 64 letters, digits, '_' or '-'.")
		case seen[k.SKU]:
			return badRequest(codeDuplicateSKU, "SKU %s is listed twice.", k.SKU)
		case !validName(k.Name):
			return badRequest(codeInvalidName, "SKU %s needs a name of 1 to %d bytes of text without control characters.", k.SKU, maxNameBytes)
		case k.PriceMinor < 0:
			return badRequest(codeInvalidPrice, "SKU %s has a negative price.", k.SKU)
		case !currencyPattern.MatchString(k.Currency):
			return badRequest(codeInvalidCurrency, "SKU %s needs an ISO 4217 currency such as INR.", k.SKU)
		case k.Stock < 0 || k.Stock > maxStock:
			return badRequest(codeInvalidStock, "SKU %s needs a stock of 0 to %d.", k.SKU, maxStock)
		}
		seen[k.SKU] = true
	}
	return nil
}

// validName accepts 1 to maxNameBytes of text without control characters
// (Postgres text cannot hold a NUL).
func validName(s string) bool {
	return s != "" && len(s) <= maxNameBytes && !strings.ContainsFunc(s, unicode.IsControl)
}

func saleFromJSON(in saleJSON) ledger.Sale {
	sale := ledger.Sale{
		ID: in.SaleID, Name: in.Name,
		// Postgres keeps microseconds: round so a repeated create compares equal.
		StartsAt: in.StartsAt.UTC().Round(time.Microsecond), EndsAt: in.EndsAt.UTC().Round(time.Microsecond),
		HoldTTL: time.Duration(in.HoldTTLSeconds) * time.Second, PerAccountLimit: in.PerAccountLimit,
		OneUnitPerPayer: in.OneUnitPerPayer == nil || *in.OneUnitPerPayer,
	}
	for _, k := range in.SKUs {
		sale.SKUs = append(sale.SKUs, ledger.SKU{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency, Stock: k.Stock})
	}
	return sale
}

func saleToJSON(sale ledger.Sale) saleJSON {
	out := saleJSON{
		SaleID: sale.ID, Name: sale.Name, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt,
		HoldTTLSeconds: int(sale.HoldTTL / time.Second), PerAccountLimit: sale.PerAccountLimit,
		OneUnitPerPayer: new(sale.OneUnitPerPayer), SKUs: []skuJSON{},
	}
	for _, k := range sale.SKUs {
		out.SKUs = append(out.SKUs, skuJSON{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency, Stock: k.Stock})
	}
	return out
}

// createSale: POST /admin/sales. Postgres first, then the stock into Redis
// (sales.Service.Create). A repeat of the same definition answers 200.
func (s *Server) createSale(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	var in saleJSON
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxAdminBody, &in); err != nil {
		return err
	}
	if err := validateSale(&in); err != nil {
		return err
	}
	sale := saleFromJSON(in)
	created, err := s.Sales.Create(c, sale)
	if err != nil {
		return err
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	writeJSON(ctx, status, saleToJSON(sale))
	return nil
}

type snapshotSKU struct {
	SKU           string `json:"sku"`
	Name          string `json:"name"`
	PriceMinor    int64  `json:"price_minor"`
	Currency      string `json:"currency"`
	AvailableHint int64  `json:"available_hint"`
}

// Snapshot is the sale snapshot of the contract.
type Snapshot struct {
	SaleID      string        `json:"sale_id"`
	Name        string        `json:"name"`
	Status      string        `json:"status"` // upcoming, open, sold_out or ended
	StartsAt    time.Time     `json:"starts_at"`
	EndsAt      time.Time     `json:"ends_at"`
	NowServing  int64         `json:"now_serving"`
	QueueLength int64         `json:"queue_length"`
	SKUs        []snapshotSKU `json:"skus"`
	SoldOut     bool          `json:"sold_out"`
	Final       bool          `json:"final"`
}

// snapshot: GET /v1/sales/{sale}. The origin runs no queue, so
// now_serving and queue_length are 0 here; the edge fills them in.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !httpapi.ValidID(params[0]) {
		return errUnknownSale
	}
	snap, err := s.Sales.Snapshot(c, params[0])
	if err != nil {
		return err
	}
	sale := snap.Sale
	out := Snapshot{SaleID: sale.ID, Name: sale.Name, Status: string(snap.Status), StartsAt: sale.StartsAt, EndsAt: sale.EndsAt,
		SKUs: []snapshotSKU{}, SoldOut: snap.SoldOut, Final: snap.Final}
	for _, k := range sale.SKUs {
		out.SKUs = append(out.SKUs, snapshotSKU{SKU: k.SKU, Name: k.Name, PriceMinor: k.PriceMinor, Currency: k.Currency,
			AvailableHint: snap.Stock[k.SKU].Available})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// ledger: GET /admin/sales/{sale}/ledger. Redis and Postgres side by side;
// drift is what remains after the pending intents are accounted for.
func (s *Server) ledger(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !httpapi.ValidID(params[0]) {
		return errUnknownSale
	}
	books, err := s.Sales.Books(c, params[0])
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, books)
	return nil
}

// rebuildSale: POST /admin/sales/{sale}/rebuild (sales.Service.Rebuild, on
// its own deadline); answers the ledger as it then stands.
func (s *Server) rebuildSale(ctx *fasthttp.RequestCtx, c context.Context, params []string) error {
	if !httpapi.ValidID(params[0]) {
		return errUnknownSale
	}
	books, err := s.Sales.Rebuild(c, params[0])
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, books)
	return nil
}
