package api

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The audit of admin changes other than a sale's admission (putAdmission
// sends those with the line's settings, and the origin keeps them with who
// made them): the defences and tarpit releases. Each is recorded at the
// origin before it is made, with who made it (actorOf), and not made when
// the origin does not take the record: an unrecorded admin change must not
// happen. GET /admin/changes reads them back for the ops dashboard.

// AdminAudit is the origin's record of admin changes: line.OriginStore.
type AdminAudit interface {
	RecordAdminChange(ctx context.Context, c line.AdminChange) error
	AdminChanges(ctx context.Context) (json.RawMessage, error)
}

var _ AdminAudit = (*line.OriginStore)(nil)

// audit is where this node records admin changes: the origin store that
// Deps.Ops holds (the app wires its one line.OriginStore there), so the
// audit needs no wiring of its own. nil when Ops is not one that records
// (a Server built by hand in a test, with no origin): every admin change is
// then refused please_wait, as when the origin is down.
func (s *Server) audit() AdminAudit {
	a, _ := s.Ops.(AdminAudit)
	return a
}

// errNotRecorded is please_wait for an admin change the origin did not
// record, and which was therefore not made.
var errNotRecorded = &httpapi.Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       httpapi.CodePleaseWait,
	Message:    "The origin could not record this change, so nothing changed; please try again in a moment.",
	RetryAfter: 2,
}

// recordChange records at the origin, within a budget of its own, that the
// requester of ctx is changing what from before to after (each marshalled
// to JSON; nil: none). It returns the record, for recordFailed, or
// errNotRecorded: then the change must not be made.
func (s *Server) recordChange(ctx *fasthttp.RequestCtx, what string, before, after any) (line.AdminChange, error) {
	audit := s.audit()
	if audit == nil {
		return line.AdminChange{}, errNotRecorded
	}
	rec := line.AdminChange{Actor: s.actorOf(ctx), What: what}
	var err error
	if rec.Before, err = stateJSON(before); err != nil {
		return line.AdminChange{}, err
	}
	if rec.After, err = stateJSON(after); err != nil {
		return line.AdminChange{}, err
	}
	c, cancel := s.budget()
	defer cancel()
	if err := audit.RecordAdminChange(c, rec); err != nil {
		s.Log.Warn("admin change not recorded at the origin, so not made", "what", what, "actor", rec.Actor, "err", err)
		// A timeout or a lost answer may hide a record the origin kept:
		// say it did not land, as when making it fails.
		s.recordFailed(rec)
		return line.AdminChange{}, errNotRecorded
	}
	return rec, nil
}

// recordFailed records, best effort, that the change rec was recorded for
// (or may have been) did not land: rec again, its what suffixed "_failed",
// with the same before and after. So the log never claims a change that
// did not happen without saying so next to it. Undoing the first record
// instead would need a delete route and still fail the same way when the
// origin is gone; if this record fails too, only the warning logged tells.
func (s *Server) recordFailed(rec line.AdminChange) {
	audit := s.audit()
	if audit == nil {
		return
	}
	rec.What += "_failed"
	c, cancel := s.budget()
	defer cancel()
	if err := audit.RecordAdminChange(c, rec); err != nil {
		s.Log.Warn("admin change that did not land not recorded at the origin", "what", rec.What, "actor", rec.Actor, "err", err)
	}
}

// stateJSON is v as the record's before or after: nil for none.
func stateJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("admin change: encode state: %w", err)
	}
	return b, nil
}

// getAdminChanges: GET /admin/changes: the last admin changes other than
// the sales' admission (GET /admin/sales/{sale}/changes has those), newest
// first, the origin's answer as it is; please_wait when the origin cannot
// be reached.
func (s *Server) getAdminChanges(ctx *fasthttp.RequestCtx, _ []string) error {
	audit := s.audit()
	if audit == nil {
		return httpapi.PleaseWait
	}
	c, cancel := s.budget()
	defer cancel()
	body, err := audit.AdminChanges(c)
	if err != nil {
		s.Log.Warn("admin changes: read from the origin failed", "err", err)
		return httpapi.PleaseWait
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(body)
	return nil
}
