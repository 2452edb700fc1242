package reserveperf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/inproc"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// runHTTP measures the HTTP path: the origin's public handler beside a bare
// fasthttp handler (and the origin with its journal off), round by round.
func runHTTP(ctx context.Context, c Config, rdb *redis.Client, prefix string, perReserve int) (_ *HTTPReport, err error) {
	perRound := c.Warmup + c.HTTPRequests
	total := c.Rounds * perRound
	rep := &HTTPReport{Conns: c.HTTPConns, Requests: c.HTTPRequests, Warmup: c.Warmup, OriginWorkers: c.OriginWork, Goal: HTTPGoal}

	// Tokens and bodies first: signing is the shopper's cost, not the origin's.
	issuer := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{AdmissionTTL: c.Timeout + 10*time.Minute})
	reqs := make([]loadgen.HTTPRequest, total)
	path := "/v1/sales/" + httpSale + "/reserve"
	for i := range reqs {
		account := fmt.Sprintf("a%012d", i)
		tok, _, err := issuer.Admission(httpSale, account, int64(i+1))
		if err != nil {
			return rep, err
		}
		reqs[i] = loadgen.HTTPRequest{
			Method: fasthttp.MethodPost, Path: path, Authorization: []byte("Bearer " + tok),
			ContentType: "application/json",
			Body:        fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k%012d"}`, sku, i),
		}
	}

	// Two origins alike but for the reserve journal, each in a schema and
	// key prefix of its own, get the same requests: what the journal costs.
	schema := strings.TrimSuffix(prefix, ":") // lowercase letters, digits and _
	startOrigin := func(schema, prefix string, noJournal bool, log *slog.Logger) (*inproc.Origin, error) {
		return inproc.StartOrigin(ctx, inproc.OriginConfig{
			RedisURL: c.RedisURL, PostgresURL: c.PostgresURL, Schema: schema, RedisPrefix: prefix,
			Sales:     []inproc.Sale{{Sale: httpSale, SKU: sku, Stock: total + slack}},
			TokenKeys: tokenstest.KeySet().String(), UserSecret: string(tokenstest.UserSecret()),
			ReservePipelines: c.Reserver[0].Pipelines, ReserveMaxBatch: c.Reserver[0].MaxBatch,
			Workers: c.OriginWork, NoJournal: noJournal, Log: log,
		})
	}
	var stops []func(context.Context) error
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			err = errors.Join(err, stops[i](stopCtx))
		}
	}()
	origin, err := startOrigin(schema, prefix+"origin:", false, c.Log)
	if err != nil {
		return rep, err
	}
	stops = append(stops, origin.Stop)
	var noJournal *inproc.Origin
	if c.HTTPNoJournal {
		// Its log warns at start that the journal is off, which the
		// benchmark asked for: only its errors are passed on.
		if noJournal, err = startOrigin(schema+"_nojournal", prefix+"nojournal:", true, quiet(c.Log)); err != nil {
			return rep, err
		}
		stops = append(stops, noJournal.Stop)
	}
	bare, err := startBare()
	if err != nil {
		return rep, err
	}
	stops = append(stops, bare.stop)

	originClient := loadgen.NewHTTP(loadgen.HTTPOptions{Addr: origin.Addr, Conns: c.HTTPConns})
	defer originClient.Close()
	bareClient := loadgen.NewHTTP(loadgen.HTTPOptions{Addr: bare.addr, Conns: c.HTTPConns})
	defer bareClient.Close()
	var noJournalClient *loadgen.HTTPClient
	if noJournal != nil {
		noJournalClient = loadgen.NewHTTP(loadgen.HTTPOptions{Addr: noJournal.Addr, Conns: c.HTTPConns})
		defer noJournalClient.Close()
	}
	var ratios, journalRatios []float64
	for round := 1; round <= c.Rounds; round++ {
		// Each round sends every server the same slice of requests: an
		// origin must never see a token twice, the bare handler does not
		// care, and each origin has a Redis prefix of its own.
		first := (round - 1) * perRound
		out := HTTPRound{Round: round}
		type target struct {
			client  *loadgen.HTTPClient
			addr    string
			profile string
			out     *HTTPRun
		}
		targets := []target{{originClient, origin.Addr, "origin", &out.Origin}}
		if noJournal != nil {
			out.OriginNoJournal = &HTTPRun{}
			targets = append(targets, target{noJournalClient, noJournal.Addr, "", out.OriginNoJournal})
		}
		for _, target := range append(targets, target{bareClient, bare.addr, "", &out.Bare}) {
			warm := target.client.Run(ctx, reqs, first, c.Warmup)
			stopProfile := func() error { return nil }
			if target.profile != "" && round == 1 {
				if stopProfile, err = procstat.StartCPUProfile(c.CPUProfile, target.profile); err != nil {
					return rep, err
				}
			}
			res, cpu, err := procstat.Around(ctx, rdb, func() loadgen.Result {
				return target.client.Run(ctx, reqs, first+c.Warmup, c.HTTPRequests)
			})
			err = errors.Join(err, stopProfile())
			if err != nil {
				return rep, err
			}
			own := 0
			if target.out != &out.Bare {
				own = res.Calls * perReserve
			}
			cpu.SetForeign(own, res.Elapsed)
			if warm.Err != nil && res.Err == nil {
				res.Err = warm.Err
			}
			*target.out = HTTPRun{Addr: target.addr, Timing: benchreport.NewTiming(res, strconv.Itoa, cpu), Created: res.Labels[fasthttp.StatusCreated]}
			target.out.Other = target.out.Calls - target.out.Created
			if res.Cut {
				rep.Rounds = append(rep.Rounds, out)
				return rep, fmt.Errorf("time cap reached after %d of %d requests to %s", res.Calls, c.HTTPRequests, target.addr)
			}
		}
		out.Ratio = out.Origin.PerSecond / out.Bare.PerSecond
		ratios = append(ratios, out.Ratio)
		if out.OriginNoJournal != nil && out.OriginNoJournal.PerSecond > 0 {
			out.JournalRatio = out.Origin.PerSecond / out.OriginNoJournal.PerSecond
			journalRatios = append(journalRatios, out.JournalRatio)
		}
		rep.Rounds = append(rep.Rounds, out)
	}
	rep.Ratio = benchreport.Median(ratios)
	rep.JournalRatio = benchreport.Median(journalRatios)
	return rep, nil
}

// quiet passes on only the errors of log.
func quiet(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(levelFloor{log.Handler(), slog.LevelError})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(attrs), h.min}
}

func (h levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(name), h.min}
}

// bareBody is what the bare handler answers: the size and shape of the
// origin's 201.
var bareBody = []byte(`{"reservation_id":"r_0123456789abcdef_http","sale_id":"http","sku":"unit","status":"held","expires_at":"2030-01-01T12:10:00.123Z"}`)

type bareServer struct {
	addr string
	stop func(context.Context) error
}

// startBare serves the ceiling: a fasthttp handler that reads the body and
// answers a fixed 201, on a server with the origin's limits and timeouts.
func startBare() (bareServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return bareServer{}, fmt.Errorf("bare server: listen: %w", err)
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if len(ctx.PostBody()) == 0 {
				ctx.SetStatusCode(fasthttp.StatusBadRequest)
				return
			}
			ctx.SetStatusCode(fasthttp.StatusCreated)
			ctx.SetContentType("application/json")
			ctx.SetBody(bareBody)
		},
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxRequestBodySize:    64 << 10,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return bareServer{addr: ln.Addr().String(), stop: func(ctx context.Context) error {
		err := srv.ShutdownWithContext(ctx)
		return errors.Join(err, <-served)
	}}, nil
}
