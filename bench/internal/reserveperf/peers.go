package reserveperf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
	"github.com/flashgate/flashgate/bench/internal/inproc"
	"github.com/flashgate/flashgate/bench/internal/loadgen"
	"github.com/flashgate/flashgate/bench/internal/procstat"
	"github.com/flashgate/flashgate/bench/internal/reservepeers"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origininternals"
	"github.com/flashgate/flashgate/tokens"
	"github.com/flashgate/flashgate/tokens/tokenstest"
)

// Goals the peers phase (issue 31) holds flashgate's attempts per second
// against, flashgate keeping every guarantee meanwhile.
const (
	PeerSeckillGoal      = 2  // flashgate / seckill
	PeerSerializableGoal = 20 // flashgate / pgserializable
)

// The designs the peers phase measures, in the order a round runs them.
const (
	PeerFlashgate    = "flashgate"      // the origin (inproc, reserve journal on)
	PeerSeckill      = "seckill"        // reservepeers.Seckill
	PeerSerializable = "pgserializable" // reservepeers.Serializable
)

// peerSale is the sale every design sells in the peers phase.
const peerSale = "peers"

// peerServer is one design's server while it runs.
type peerServer struct {
	addr string
	// books reads the design's own books after the run into run.Sold
	// (and run.Journaled for flashgate).
	books func(ctx context.Context, run *PeerRun) error
	stop  func(ctx context.Context) error
}

// peerDesign is how a round starts one design and what it sends it.
type peerDesign struct {
	name  string
	reqs  []loadgen.HTTPRequest
	start func(ctx context.Context, round int) (peerServer, error)
}

// runPeers measures flashgate's reserve path beside the seckill and the
// pgserializable design (issue 31): in each round each design, started
// fresh with c.PeerUnits units, gets c.PeerAccounts shoppers, each
// attempting once with an admission token of its own, from c.PeerConns
// connections; flashgate's guarantees are checked after its run. There is
// no warm-up (c.Warmup is not used): it would spend tokens and units, and
// every design pays alike for opening its connections.
func runPeers(ctx context.Context, c Config, rdb *redis.Client, prefix string) (*PeersReport, error) {
	rep := &PeersReport{Units: c.PeerUnits, Accounts: c.PeerAccounts, Conns: c.PeerConns, OriginWorkers: c.OriginWork,
		SeckillGoal: PeerSeckillGoal, SerializableGoal: PeerSerializableGoal, GuaranteesKept: true}
	// Tokens and bodies first: signing is the shopper's cost, not the
	// server's. Each round's origin has a Redis prefix of its own, so the
	// same tokens serve every round.
	reqs, withAccount, err := peerRequests(c)
	if err != nil {
		return rep, err
	}
	schema := strings.TrimSuffix(prefix, ":") // lowercase letters, digits and _
	designs := []peerDesign{
		{PeerFlashgate, reqs, func(ctx context.Context, round int) (peerServer, error) {
			return startFlashgatePeer(ctx, c, rdb, fmt.Sprintf("%s_peers_fg%d", schema, round), fmt.Sprintf("%speers%d:", prefix, round))
		}},
		// The seckill reads neither the token nor the account: it gets
		// flashgate's requests as they are.
		{PeerSeckill, reqs, func(ctx context.Context, round int) (peerServer, error) {
			s, err := reservepeers.StartSeckill(ctx, reservepeers.SeckillConfig{RedisURL: c.RedisURL,
				Prefix: fmt.Sprintf("%sseckill%d:", prefix, round), Sale: peerSale, SKU: sku, Stock: c.PeerUnits})
			if err != nil {
				return peerServer{}, err
			}
			return serverOf(s.Addr, s), nil
		}},
		{PeerSerializable, withAccount, func(ctx context.Context, round int) (peerServer, error) {
			s, err := reservepeers.StartSerializable(ctx, reservepeers.SerializableConfig{PostgresURL: c.PostgresURL,
				Schema: fmt.Sprintf("%s_peers_pg%d", schema, round), Sale: peerSale, SKU: sku, Stock: c.PeerUnits})
			if err != nil {
				return peerServer{}, err
			}
			return serverOf(s.Addr, s), nil
		}},
	}

	var seckillRatios, serializableRatios []float64
	for round := 1; round <= c.Rounds; round++ {
		out := PeerRound{Round: round}
		runs := map[string]*PeerRun{PeerFlashgate: &out.Flashgate, PeerSeckill: &out.Seckill, PeerSerializable: &out.Serializable}
		for _, d := range designs {
			run, err := runPeer(ctx, c, rdb, d, round)
			*runs[d.name] = run
			if err != nil {
				rep.Rounds = append(rep.Rounds, out)
				return rep, fmt.Errorf("round %d, %s: %w", round, d.name, err)
			}
		}
		if out.Seckill.PerSecond > 0 {
			out.SeckillRatio = out.Flashgate.PerSecond / out.Seckill.PerSecond
			seckillRatios = append(seckillRatios, out.SeckillRatio)
		}
		if out.Serializable.PerSecond > 0 {
			out.SerializableRatio = out.Flashgate.PerSecond / out.Serializable.PerSecond
			serializableRatios = append(serializableRatios, out.SerializableRatio)
		}
		out.Flashgate.Broken = flashgateBroken(out.Flashgate, c.PeerUnits)
		out.Seckill.Broken = peerBroken(out.Seckill, c.PeerUnits)
		out.Serializable.Broken = peerBroken(out.Serializable, c.PeerUnits)
		rep.Rounds = append(rep.Rounds, out)
		rep.SeckillRatio = benchreport.Median(seckillRatios)
		rep.SerializableRatio = benchreport.Median(serializableRatios)
		if len(out.Flashgate.Broken) > 0 {
			rep.GuaranteesKept = false
			return rep, fmt.Errorf("round %d: flashgate broke its guarantees: %s", round, strings.Join(out.Flashgate.Broken, "; "))
		}
		for _, run := range []PeerRun{out.Seckill, out.Serializable} {
			if len(run.Broken) > 0 {
				return rep, fmt.Errorf("round %d: %s %s, so the comparison is void", round, run.Design, strings.Join(run.Broken, "; "))
			}
		}
	}
	return rep, nil
}

// peer is one of reservepeers' servers: it stops, and it tells the units
// it sold by its own books.
type peer interface {
	Stop(context.Context) error
	Sold(context.Context) (int, error)
}

// serverOf is p, listening at addr, as a design's server of the phase.
func serverOf(addr string, p peer) peerServer {
	return peerServer{addr: addr, stop: p.Stop, books: func(ctx context.Context, run *PeerRun) (err error) {
		run.Sold, err = p.Sold(ctx)
		return err
	}}
}

// runPeer starts d fresh, sends it every request once, reads its books and
// stops it.
func runPeer(ctx context.Context, c Config, rdb *redis.Client, d peerDesign, round int) (run PeerRun, err error) {
	run.Design = d.name
	srv, err := d.start(ctx, round)
	if err != nil {
		return run, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, srv.stop(stopCtx))
	}()
	run.Addr = srv.addr
	client := loadgen.NewHTTP(loadgen.HTTPOptions{Addr: srv.addr, Conns: c.PeerConns})
	defer client.Close()
	stopProfile := func() error { return nil }
	if round == 1 { // the process holds the load generator and the design's server: the profile shows both
		if stopProfile, err = procstat.StartCPUProfile(c.CPUProfile, "peers "+strings.Fields(d.name)[0]); err != nil {
			return run, err
		}
	}
	res, cpu, err := procstat.Around(ctx, rdb, func() loadgen.Result {
		return client.Run(ctx, d.reqs, 0, c.PeerAccounts)
	})
	if err = errors.Join(err, stopProfile()); err != nil {
		return run, err
	}
	run.Timing = benchreport.NewTiming(res, strconv.Itoa, cpu)
	for status, n := range res.Labels {
		switch {
		case status == fasthttp.StatusCreated:
			run.Created += n
		case status == fasthttp.StatusConflict:
			run.SoldOut += n
		case status >= 500:
			run.Failed += n
		}
	}
	run.Other = run.Calls - run.Created - run.SoldOut - run.Failed
	if res.Cut {
		return run, fmt.Errorf("time cap reached after %d of %d attempts", res.Calls, c.PeerAccounts)
	}
	booksCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return run, srv.books(booksCtx, &run)
}

// peerRequests builds one reserve per account, each with an admission
// token of its own: reqs as flashgate's handler takes them, and withAccount
// the same with the account in the body too, where pgserializable reads it.
func peerRequests(c Config) (reqs, withAccount []loadgen.HTTPRequest, err error) {
	issuer := tokens.NewIssuer(tokenstest.KeySet(), tokens.IssuerOptions{AdmissionTTL: c.Timeout + 10*time.Minute})
	path := "/v1/sales/" + peerSale + "/reserve"
	reqs = make([]loadgen.HTTPRequest, c.PeerAccounts)
	withAccount = make([]loadgen.HTTPRequest, c.PeerAccounts)
	for i := range reqs {
		account := fmt.Sprintf("a%012d", i)
		tok, _, err := issuer.Admission(peerSale, account, int64(i+1))
		if err != nil {
			return nil, nil, err
		}
		reqs[i] = loadgen.HTTPRequest{
			Method: fasthttp.MethodPost, Path: path, Authorization: []byte("Bearer " + tok),
			ContentType: "application/json",
			Body:        fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k%012d"}`, sku, i),
		}
		withAccount[i] = reqs[i]
		withAccount[i].Body = fmt.Appendf(nil, `{"sku":%q,"idempotency_key":"k%012d","account":%q}`, sku, i, account)
	}
	return reqs, withAccount, nil
}

// startFlashgatePeer starts the origin as the HTTP phase does, its reserve
// journal on, with one sale of c.PeerUnits units, in schema and under
// redisPrefix; stopping it drops the schema and deletes the keys.
func startFlashgatePeer(ctx context.Context, c Config, rdb *redis.Client, schema, redisPrefix string) (peerServer, error) {
	origin, err := inproc.StartOrigin(ctx, inproc.OriginConfig{
		RedisURL: c.RedisURL, PostgresURL: c.PostgresURL, Schema: schema, RedisPrefix: redisPrefix,
		Sales:     []inproc.Sale{{Sale: peerSale, SKU: sku, Stock: c.PeerUnits}},
		TokenKeys: tokenstest.KeySet().String(), UserSecret: string(tokenstest.UserSecret()),
		ReservePipelines: c.Reserver[0].Pipelines, ReserveMaxBatch: c.Reserver[0].MaxBatch,
		Workers: c.OriginWork, Log: c.Log,
	})
	if err != nil {
		return peerServer{}, err
	}
	store := origininternals.NewStore(rdb, origininternals.NewKeys(redisPrefix), retention)
	return peerServer{
		addr: origin.Addr,
		books: func(ctx context.Context, run *PeerRun) error {
			inv, err := store.Inventory(ctx, peerSale, []string{sku})
			if err != nil {
				return err
			}
			st, ok := inv[sku]
			if !ok {
				return fmt.Errorf("the origin's Redis holds no inventory of %s", sku)
			}
			run.Sold = int(st.Total - st.Available)
			run.Journaled, err = journalRows(ctx, c.PostgresURL, schema)
			return err
		},
		stop: func(ctx context.Context) error {
			err := origin.Stop(ctx)
			_, derr := testenv.DeleteKeys(ctx, rdb, redisPrefix) // 20,000 shoppers' keys would slow the next rounds' SCANs
			return errors.Join(err, derr)
		},
	}, nil
}

// journalRows counts the origin's reserve journal rows for the peers' sale.
func journalRows(ctx context.Context, pgURL, schema string) (int, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, fmt.Errorf("journal rows: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	table := pgx.Identifier{schema, "reserve_journal"}.Sanitize()
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE sale_id = $1", peerSale).Scan(&n); err != nil {
		return 0, fmt.Errorf("journal rows: %w", err)
	}
	return n, nil
}

// flashgateBroken lists the guarantees a flashgate run broke, none when it
// kept them all: every unit sold and none twice (201s == units, and the
// origin's books agree), every 201 journaled before it was answered, no
// 5xx, and every other shopper told sold out.
func flashgateBroken(run PeerRun, units int) []string {
	var broken []string
	if run.Created != units {
		broken = append(broken, fmt.Sprintf("%d answered 201, want exactly the %d units", run.Created, units))
	}
	if run.Sold > units {
		broken = append(broken, fmt.Sprintf("%d units gone from a stock of %d", run.Sold, units))
	}
	if run.Sold != run.Created {
		broken = append(broken, fmt.Sprintf("%d units gone from the stock for %d answered 201", run.Sold, run.Created))
	}
	if run.Journaled != run.Created {
		broken = append(broken, fmt.Sprintf("%d journal rows for %d answered 201", run.Journaled, run.Created))
	}
	if run.Failed > 0 {
		broken = append(broken, fmt.Sprintf("%d answered 5xx", run.Failed))
	}
	if run.Other > 0 {
		broken = append(broken, fmt.Sprintf("%d neither taken nor told sold out (%s; first error: %s)", run.Other, benchreport.Counts(run.Answers), run.FirstError))
	}
	return broken
}

// peerBroken lists what voids a peer's run: selling more than the stock,
// or books that disagree with its 201s. Neither peer promises more.
func peerBroken(run PeerRun, units int) []string {
	var broken []string
	if run.Sold > units {
		broken = append(broken, fmt.Sprintf("sold %d of a stock of %d", run.Sold, units))
	}
	if run.Created > run.Sold {
		broken = append(broken, fmt.Sprintf("answered 201 %d times for %d units sold", run.Created, run.Sold))
	}
	return broken
}
