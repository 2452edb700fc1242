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
// object naming only those (docs/API.md). They are stored in Redis, where
// every node takes them within a second: 200 with the whole settings. A
// body that is not valid settings is 400 invalid_defences, and nothing
// changes; when Redis does not take them, nothing changes either, and the
// answer is please_wait.
func (s *Server) putDefences(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	c, cancel := s.budget()
	defer cancel()
	st, err := s.Defences.Change(c, ctx.PostBody())
	if errors.Is(err, defence.ErrInvalid) {
		return httpapi.New(fasthttp.StatusBadRequest, codeInvalidDefences, err.Error())
	}
	if err != nil {
		return err
	}
	s.Log.Info("defences changed", "version", st.Version, "settings", string(ctx.PostBody()))
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
// with the entry released, 404 not_tarpitted when no node holds it.
func (s *Server) releaseTarpit(ctx *fasthttp.RequestCtx, _ []string) error {
	if s.Defences == nil {
		return errNoDefences
	}
	c, cancel := s.budget()
	defer cancel()
	e, err := s.Defences.Release(c, string(ctx.QueryArgs().Peek("account")))
	if errors.Is(err, defence.ErrNotTarpitted) {
		return errNotTarpitted
	}
	if err != nil {
		return err
	}
	s.Log.Info("tarpit: released by ops", "account", e.Account)
	httpapi.WriteJSON(ctx, fasthttp.StatusOK, e)
	return nil
}
