package api

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The defence routes' own error codes.
const (
	codeInvalidDefences = "invalid_defences" // a PUT /admin/defences body
	codeNotTarpitted    = "not_tarpitted"    // a release of what the tarpit does not hold
	codeNoDefences      = "no_defences"      // a node started without them (tests)
)

var (
	errNotTarpitted = httpapi.New(fasthttp.StatusNotFound, codeNotTarpitted,
		"The tarpit holds no such account: name it as GET /admin/tarpit lists it, ?account=<account id>.")
	errNoDefences = httpapi.New(fasthttp.StatusNotFound, codeNoDefences, "This node runs without defences.")
)

// getDefences: GET /admin/defences, the settings in force on this node.
func (s *Server) getDefences(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, s.Defences.Settings())
	return nil
}

// putDefences: PUT /admin/defences with the settings to change, as a JSON
// object naming only those (docs/API.md). They are recorded at the origin
// (recordChange), then stored in Redis, where every node takes them within
// a second: 200 with the whole settings. A body that is not valid settings
// is 400 invalid_defences, and nothing is recorded or changed. When the
// origin does not record the change, or Redis does not take it, nothing
// changes and the answer is please_wait; the latter is recorded as
// defences_failed.
func (s *Server) putDefences(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	// A bad body is refused before Redis or the origin is asked.
	if _, err := s.Defences.Settings().Merge(ctx.PostBody()); err != nil {
		return httpapi.New(fasthttp.StatusBadRequest, codeInvalidDefences, err.Error())
	}
	// Catch up with changes made on other nodes, so that before is what
	// this change changes. Another node's change landing between here and
	// Change would make the stored settings differ from after; its own
	// record says so.
	c, cancel := s.budget()
	err := s.Defences.Sync(c)
	cancel()
	if err != nil {
		return err
	}
	before := s.Defences.Settings()
	after, err := before.Merge(ctx.PostBody())
	if err != nil {
		return httpapi.New(fasthttp.StatusBadRequest, codeInvalidDefences, err.Error())
	}
	after.Version = before.Version + 1 // as Change numbers it
	rec, err := s.recordChange(ctx, "defences", before, after)
	if err != nil {
		return err
	}
	c, cancel = s.budget()
	defer cancel()
	st, err := s.Defences.Change(c, ctx.PostBody())
	if err != nil {
		s.recordFailed(rec)
		if errors.Is(err, defence.ErrInvalid) {
			return httpapi.New(fasthttp.StatusBadRequest, codeInvalidDefences, err.Error())
		}
		return err
	}
	s.Log.Info("defences changed", "version", st.Version, "settings", string(ctx.PostBody()), "actor", rec.Actor)
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, st)
	return nil
}

// getTarpit: GET /admin/tarpit, what this node's copy of the tarpit holds.
func (s *Server) getTarpit(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	entries := s.Defences.List()
	if entries == nil {
		entries = []defence.Entry{}
	}
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, map[string]any{"entries": entries})
	return nil
}

// releaseTarpit: DELETE /admin/tarpit?account=..., on every node: 200
// with the entry released, 404 not_tarpitted when no node holds it. The
// release is recorded at the origin first, with the entry as before and
// nothing after; when the origin does not record it, or Redis does not
// take it, nothing changes and the answer is please_wait (the latter, and
// an entry gone meanwhile, recorded as tarpit_release_failed).
func (s *Server) releaseTarpit(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	account := string(ctx.QueryArgs().Peek("account"))
	// What every node caught, as Release reads it, so the record's before
	// is the entry released.
	c, cancel := s.budget()
	err := s.Defences.Sync(c)
	cancel()
	if err != nil {
		return err
	}
	held, ok := s.tarpitEntry(account)
	if !ok {
		return errNotTarpitted
	}
	rec, err := s.recordChange(ctx, "tarpit_release", held, nil)
	if err != nil {
		return err
	}
	c, cancel = s.budget()
	defer cancel()
	e, err := s.Defences.Release(c, account)
	if err != nil {
		s.recordFailed(rec)
		if errors.Is(err, defence.ErrNotTarpitted) {
			return errNotTarpitted
		}
		return err
	}
	s.Log.Info("tarpit: released by ops", "account", e.Account, "actor", rec.Actor)
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, e)
	return nil
}

// tarpitEntry is this node's copy of account's tarpit entry; false when it
// holds none.
func (s *Server) tarpitEntry(account string) (defence.Entry, bool) {
	for _, e := range s.Defences.List() {
		if e.Account == account {
			return e, true
		}
	}
	return defence.Entry{}, false
}
