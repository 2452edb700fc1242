package api

import (
	"context"
	"errors"
	"time"

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
	// errOutcomeUnknown is please_wait for a change recorded at the origin
	// that Redis may or may not have made (recorded again as _unknown).
	errOutcomeUnknown = &httpapi.Error{
		Status:     fasthttp.StatusServiceUnavailable,
		Code:       httpapi.CodePleaseWait,
		Message:    "This edge could not tell whether the change was made; read the defences or the tarpit before trying it again.",
		RetryAfter: 2,
	}
)

// landedBudget bounds the re-read that decides whether a change Redis did
// not confirm landed after all: short, as ops are waiting and Redis has
// just failed once.
const landedBudget = 500 * time.Millisecond

// landing is what the re-read says of a change Redis did not confirm: a
// timeout or a lost answer can come after Redis applied the write.
type landing int

const (
	notLanded      landing = iota // not in force: it was not made
	landed                        // in force: Redis made it, and its answer was lost
	landingUnknown                // the re-read failed too, or a newer change hides it
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
// is 400 invalid_defences, and nothing is recorded or changed. Otherwise
// please_wait, with nothing changed: when Redis fails before the record
// (nothing recorded), when the origin does not record the change, or when
// Redis does not take it (recorded again as defences_failed). When Redis
// fails to answer but the re-read finds the change in force, it is 200;
// when the re-read cannot tell, please_wait, recorded as
// defences_unknown.
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
	switch {
	case errors.Is(err, defence.ErrInvalid):
		// Refused against settings another node stored meanwhile, before
		// anything was written.
		s.recordOutcome(rec, outcomeFailed)
		return httpapi.New(fasthttp.StatusBadRequest, codeInvalidDefences, err.Error())
	case err != nil:
		switch s.defencesLanded(after) {
		case notLanded:
			s.recordOutcome(rec, outcomeFailed)
			return err
		case landingUnknown:
			s.Log.Warn("defences change: not known whether it was made", "actor", rec.Actor, "err", err)
			s.recordOutcome(rec, outcomeUnknown)
			return errOutcomeUnknown
		}
		s.Log.Warn("defences change: made, though Redis's answer was lost", "actor", rec.Actor, "err", err)
		st = after
	}
	s.Log.Info("defences changed", "version", st.Version, "settings", string(ctx.PostBody()), "actor", rec.Actor)
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, st)
	return nil
}

// defencesLanded re-reads, within a budget of its own, the settings of a
// change Change did not confirm: it landed when the settings in force are
// after, version and content alike. Settings of a later version, another
// node's change since, may have been made on top of it or instead of it:
// unknown.
func (s *Server) defencesLanded(after defence.Settings) landing {
	c, cancel := context.WithTimeout(context.Background(), landedBudget)
	defer cancel()
	if err := s.Defences.Sync(c); err != nil {
		return landingUnknown
	}
	switch now := s.Defences.Settings(); {
	case now == after:
		return landed
	case now.Version > after.Version:
		return landingUnknown
	default:
		return notLanded
	}
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
// nothing after. Otherwise please_wait, with nothing changed: when Redis
// fails before the record (nothing recorded), when the origin does not
// record the release, or when Redis does not take it (recorded again as
// tarpit_release_failed). An entry released or expired between the check
// and the release is 404, recorded and then recorded as failed. When Redis
// fails to answer but the re-read finds the entry gone, it is 200; when
// the re-read cannot tell, please_wait, recorded as
// tarpit_release_unknown.
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
	switch {
	case errors.Is(err, defence.ErrNotTarpitted):
		// Gone since the check: this release wrote nothing.
		s.recordOutcome(rec, outcomeFailed)
		return errNotTarpitted
	case err != nil:
		switch s.releaseLanded(account) {
		case notLanded:
			s.recordOutcome(rec, outcomeFailed)
			return err
		case landingUnknown:
			s.Log.Warn("tarpit: not known whether the release was made", "account", account, "actor", rec.Actor, "err", err)
			s.recordOutcome(rec, outcomeUnknown)
			return errOutcomeUnknown
		}
		s.Log.Warn("tarpit: released, though Redis's answer was lost", "account", account, "actor", rec.Actor, "err", err)
		e = held
	}
	s.Log.Info("tarpit: released by ops", "account", e.Account, "actor", rec.Actor)
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, e)
	return nil
}

// releaseLanded re-reads, within a budget of its own, the tarpit after a
// release of account that Release did not confirm: it landed when no node
// holds the account any more.
func (s *Server) releaseLanded(account string) landing {
	c, cancel := context.WithTimeout(context.Background(), landedBudget)
	defer cancel()
	if err := s.Defences.Sync(c); err != nil {
		return landingUnknown
	}
	if _, ok := s.tarpitEntry(account); ok {
		return notLanded
	}
	return landed
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
