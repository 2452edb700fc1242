package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/line"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The audit of admin changes other than a sale's admission (putAdmission
// sends those with the line's settings, and the origin keeps them with who
// made them): the defences and tarpit releases. Each is recorded at the
// origin (Deps.Audit) before it is made, with who made it (actorOf), and
// not made when the origin does not take the record: an unrecorded admin
// change must not happen. GET /admin/changes reads them back for the ops
// dashboard.

// AdminAudit is the origin's record of admin changes: line.OriginStore.
type AdminAudit interface {
	RecordAdminChange(ctx context.Context, c line.AdminChange) error
	AdminChanges(ctx context.Context) (json.RawMessage, error)
}

var _ AdminAudit = (*line.OriginStore)(nil)

// errNotRecorded is please_wait for an admin change the origin did not
// record, and which was therefore not made.
var errNotRecorded = &httpapi.Error{
	Status:     fasthttp.StatusServiceUnavailable,
	Code:       httpapi.CodePleaseWait,
	Message:    "The origin could not record this change, so nothing changed; please try again in a moment.",
	RetryAfter: 2,
}

// What a second record of an admin change says of it, as a suffix of the
// first one's what.
const (
	outcomeFailed  = "_failed"  // it did not land
	outcomeUnknown = "_unknown" // the edge could not tell whether it landed
)

// recordChange records at the origin, within a budget of its own, that the
// requester of ctx is changing what from before to after (each marshalled
// to JSON; nil: none). It returns the record, for recordOutcome, or
// errNotRecorded: then the change must not be made.
func (s *Server) recordChange(ctx *fasthttp.RequestCtx, what string, before, after any) (line.AdminChange, error) {
	if s.Audit == nil {
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
	err = s.Audit.RecordAdminChange(c, rec)
	var refused *line.OriginError
	switch {
	case err == nil:
		return rec, nil
	case errors.As(err, &refused) && refused.Status >= 400 && refused.Status < 500:
		// The origin answered that it did not keep the record, so there is
		// nothing to take back. Logged as an error: an edge whose records
		// the origin refuses (keys that differ, a bug) can make no admin
		// change at all until someone fixes it.
		s.Log.Error("the origin refused the record of an admin change, so it was not made", "what", what, "actor", rec.Actor,
			"status", refused.Status, "code", refused.Code)
	default:
		s.Log.Warn("admin change not recorded at the origin, so not made", "what", what, "actor", rec.Actor, "err", err)
		// A timeout or a lost answer may hide a record the origin kept:
		// say it did not land, as when making it fails.
		s.recordOutcome(rec, outcomeFailed)
	}
	return line.AdminChange{}, errNotRecorded
}

// recordOutcome records, best effort, what became of the change rec was
// recorded for (or may have been) when making it did not plainly succeed:
// rec again, its what suffixed with outcome (outcomeFailed or
// outcomeUnknown), with the same actor, before and after. When this record
// fails too, the log holds a change that did not happen, or may not have,
// with nothing next to it saying so: only the warning logged here tells.
func (s *Server) recordOutcome(rec line.AdminChange, outcome string) {
	if s.Audit == nil {
		return
	}
	rec.What += outcome
	c, cancel := s.budget()
	defer cancel()
	if err := s.Audit.RecordAdminChange(c, rec); err != nil {
		s.Log.Warn("admin change's outcome not recorded at the origin", "what", rec.What, "actor", rec.Actor, "err", err)
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
	if s.Audit == nil {
		return httpapi.PleaseWait
	}
	c, cancel := s.budget()
	defer cancel()
	body, err := s.Audit.AdminChanges(c)
	if err != nil {
		s.Log.Warn("admin changes: read from the origin failed", "err", err)
		return httpapi.PleaseWait
	}
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(body)
	return nil
}
