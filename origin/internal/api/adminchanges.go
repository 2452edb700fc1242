package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
	"github.com/flashgate/flashgate/origin/internal/ledger"
)

// The admin changes routes keep, for the ops dashboard, every admin change
// ops make through an edge other than a sale's admission settings (the
// line's settings route keeps those): the defences, a tarpit release. The
// edge records a change here before it makes it, so they are signed line
// requests like the /v1/lines routes (signed), and only edges call them.

// The admin changes routes' own error codes.
const (
	codeInvalidWhat  = "invalid_what"
	codeInvalidState = "invalid_before_after"
)

var (
	errAdminActor = badRequest(codeInvalidActor, "actor must be 1 to %d bytes of printable text.", maxActor)
	errAdminWhat  = badRequest(codeInvalidWhat, "what must be 1 to 64 letters, digits, '_' or '-', such as defences or tarpit_release.")
	errAdminState = badRequest(codeInvalidState, "before and after must each be a JSON object or null, with no \\u0000 and no number beyond what Postgres keeps.")
)

// adminChangeJSON is one admin change as the routes answer it.
type adminChangeJSON struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	What   string          `json:"what"`
	Before json.RawMessage `json:"before"` // null when none
	After  json.RawMessage `json:"after"`  // null when none
}

func adminChangeOf(c ledger.AdminChange) adminChangeJSON {
	return adminChangeJSON{ID: c.ID, At: c.At, Actor: c.Actor, What: c.What, Before: c.Before, After: c.After}
}

// recordAdminChange: POST /v1/admin-changes {actor, what, before?, after?}:
// keeps the change and answers it as kept, with its id and time. The actor
// is required (who is the point of the record), what is an id, and before
// and after are JSON objects or null; anything else is 400 and nothing is
// kept.
func (s *Server) recordAdminChange(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	var body struct {
		Actor  string          `json:"actor"`
		What   string          `json:"what"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	if err := httpapi.DecodeJSON(ctx, s.opts.MaxPublicBody, &body); err != nil {
		return err
	}
	if body.Actor == "" || !validActor(body.Actor) {
		return errAdminActor
	}
	if !httpapi.ValidID(body.What) {
		return errAdminWhat
	}
	if !objectOrNull(body.Before) || !objectOrNull(body.After) {
		return errAdminState
	}
	kept, err := s.Ledger.RecordAdminChange(c, ledger.AdminChange{Actor: body.Actor, What: body.What, Before: body.Before, After: body.After})
	if errors.Is(err, ledger.ErrInvalidState) {
		return errAdminState
	}
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, adminChangeOf(kept))
	return nil
}

// objectOrNull: raw, as DecodeJSON left it (valid JSON or nothing), is
// absent, null or an object.
func objectOrNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null")) || raw[0] == '{'
}

// maxAdminChangesBytes bounds the list's answer: an edge reads at most
// 64 KiB of an answer of the origin (line.OriginStore), and a change of the
// defences alone is near 1 KB, so maxChanges of them may not fit.
const maxAdminChangesBytes = 48 << 10

// adminChanges: GET /v1/admin-changes: the last maxChanges admin changes,
// newest first, leaving out the older ones that would take the answer
// beyond maxAdminChangesBytes; for the ops dashboard on the edges.
func (s *Server) adminChanges(ctx *fasthttp.RequestCtx, c context.Context, _ []string) error {
	changes, err := s.Ledger.AdminChanges(c, maxChanges)
	if err != nil {
		return err
	}
	out := struct {
		Changes []json.RawMessage `json:"changes"`
	}{Changes: make([]json.RawMessage, 0, len(changes))}
	size := 0
	for _, ch := range changes {
		b, err := json.Marshal(adminChangeOf(ch))
		if err != nil {
			return fmt.Errorf("admin changes: %w", err)
		}
		if size += len(b) + 1; size > maxAdminChangesBytes {
			break
		}
		out.Changes = append(out.Changes, b)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}
