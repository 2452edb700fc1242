package crowdsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readQueueAnswer reads every field the shopper acts on, tells a final
// false from an absent one, and reads a body that is not JSON as nothing.
func TestReadQueueAnswer(t *testing.T) {
	no, yes := false, true
	for _, tt := range []struct {
		body string
		want queueAnswer
	}{
		{`{"queue_token":"qt","position":4242,"poll_after_ms":1500,"state":"waiting"}`,
			queueAnswer{QueueToken: "qt", Position: 4242, PollAfterMS: 1500, State: "waiting"}},
		{`{"state":"admitted","admission_token":"at.x.y","position":7}`,
			queueAnswer{State: "admitted", AdmissionToken: "at.x.y", Position: 7}},
		{`{"state":"sold_out","final":false}`, queueAnswer{State: "sold_out", Final: &no}},
		{`{"error":"sold_out","final":true}`, queueAnswer{Error: "sold_out", Final: &yes}},
		{`{"error":"challenge_required","message":"…","request_id":"r","challenge":"v1.k1.s.1.8.n.m","difficulty_bits":8}`,
			queueAnswer{Error: "challenge_required", Challenge: "v1.k1.s.1.8.n.m", DifficultyBits: 8}},
		{`please wait`, queueAnswer{}},
		{``, queueAnswer{}},
	} {
		if got := readQueueAnswer([]byte(tt.body)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("readQueueAnswer(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

// challengeEdge is an edge with a sale that may ask joins for a proof of
// work: its snapshot publishes the challenge published (none when ""), and
// a join is taken when it carries a solution of the published challenge
// for the account (acceptPublished) or of the personal one it hands out
// in its 403 challenge_required (acceptPersonal). It checks the work
// itself, with the hashes of pow_test.go, and answers a status poll
// "sold out", finally, which ends the shopper.
type challengeEdge struct {
	account                         string
	published                       string
	acceptPublished, acceptPersonal bool

	mu    sync.Mutex
	joins []string // each join's X-Challenge ("" without)
}

const (
	testPublishedBits = 8
	testPersonal      = "v1.k1.s.1700000040.8.AAAAAAAAAAAAAAAAAAAAAA.bWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWFjbWE"
)

func (e *challengeEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/sales/s":
		w.Header().Set("Cache-Control", "public, max-age=1, stale-while-revalidate=5")
		if e.published == "" {
			_, _ = fmt.Fprint(w, `{"now_serving":0,"sold_out":false}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"now_serving":0,"sold_out":false,"challenge":{"value":%q,"difficulty_bits":%d}}`, e.published, testPublishedBits)
	case "/v1/sales/s/queue":
		ch, sol := r.Header.Get("X-Challenge"), r.Header.Get("X-Challenge-Solution")
		e.mu.Lock()
		e.joins = append(e.joins, ch)
		e.mu.Unlock()
		ok := e.published == "" && !e.acceptPersonal // no proof of work asked
		switch {
		case ch == e.published && ch != "":
			ok = e.acceptPublished && zeroBitsOfPublished(ch, e.account, sol) >= testPublishedBits
		case ch == testPersonal:
			ok = e.acceptPersonal && zeroBitsOf(ch, sol) >= 8
		}
		if !ok {
			w.WriteHeader(403)
			_, _ = fmt.Fprintf(w, `{"error":"challenge_required","challenge":%q,"difficulty_bits":8}`, testPersonal)
			return
		}
		w.WriteHeader(202)
		_, _ = fmt.Fprint(w, `{"queue_token":"qt","state":"waiting","position":1,"poll_after_ms":10}`)
	case "/v1/sales/s/queue/status":
		_, _ = fmt.Fprint(w, `{"state":"sold_out","final":true}`)
	default:
		http.NotFound(w, r)
	}
}

// A page solves the challenge its first snapshot publishes, for its own
// account, and joins once with it; a refused solution (403
// challenge_required) goes the personal challenge's way; a sale without a
// published challenge asks for a personal one as before; and the shopper
// stops after maxChallenges solutions in a row refused, the published one
// among them. A bot reads the snapshot as the page does.
func TestShopperSolvesThePublishedChallengeBeforeItJoins(t *testing.T) {
	const published = "p1.k1.s.1700000040.8.SRnMaQc7zLYnMUkJdHQhtJtSdf8AFPFgq2A4P1Km2Xo"
	hammering := &cohortRun{BotCohort: BotCohort{Name: "hammering", PollMS: 10, ServerCPU: true}}
	for _, tt := range []struct {
		name                            string
		published                       string
		acceptPublished, acceptPersonal bool
		cohort                          *cohortRun
		joins                           []string // each join's challenge
		solved, challengeRequired, in   bool
	}{
		{"published, taken", published, true, false, nil, []string{published}, true, false, true},
		{"published, taken, a bot", published, true, false, hammering, []string{published}, true, false, true},
		{"published, refused", published, false, true, nil, []string{published, testPersonal}, true, true, true},
		{"not published", "", false, true, nil, []string{"", testPersonal}, true, true, true},
		{"no proof of work", "", false, false, nil, []string{""}, false, false, true},
		{"every solution refused", published, false, false, nil, []string{published, testPersonal, testPersonal}, true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const account = "shopper-00042"
			edge := &challengeEdge{account: account, published: tt.published, acceptPublished: tt.acceptPublished, acceptPersonal: tt.acceptPersonal}
			srv := httptest.NewServer(edge)
			defer srv.Close()
			c, err := newClient(srv.URL, 4, 5*time.Second, newRecorder(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			s := &sim{edge: c, cdn: newCDN(c, "/v1/sales/s"), sale: "s", zero: time.Now()}
			sh := &shopper{account: account, ip: "192.0.2.1", userToken: "ut", cohort: tt.cohort, bot: tt.cohort != nil,
				rng: rand.New(rand.NewPCG(1, 2))}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.shop(ctx, sh)
			edge.mu.Lock()
			joins := slices.Clone(edge.joins)
			edge.mu.Unlock()
			if !slices.Equal(joins, tt.joins) {
				t.Errorf("joins carried %q, want %q", joins, tt.joins)
			}
			if sh.solved != tt.solved || sh.challengeRequired != tt.challengeRequired || sh.joined != tt.in {
				t.Errorf("solved %v, challenge_required %v, joined %v; want %v, %v, %v",
					sh.solved, sh.challengeRequired, sh.joined, tt.solved, tt.challengeRequired, tt.in)
			}
			if !tt.in && sh.fate != fateGaveUp {
				t.Errorf("fate %v after every solution refused, want gave up", sh.fate)
			}
		})
	}
}

// waitingEdge is an edge whose snapshot shows now_serving 100 while every
// status poll answers "waiting" at place 5, as for a shopper the tarpit
// holds. It counts the polls.
type waitingEdge struct{ polls atomic.Int64 }

func (e *waitingEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/sales/s":
		w.Header().Set("Cache-Control", "public, max-age=1, stale-while-revalidate=5")
		_, _ = fmt.Fprint(w, `{"now_serving":100,"sold_out":false}`)
	case "/v1/sales/s/queue":
		w.WriteHeader(202)
		_, _ = fmt.Fprint(w, `{"queue_token":"qt","position":5,"poll_after_ms":500}`)
	case "/v1/sales/s/queue/status":
		e.polls.Add(1)
		_, _ = fmt.Fprint(w, `{"state":"waiting","position":5,"now_serving":100,"poll_after_ms":500}`)
	default:
		http.NotFound(w, r)
	}
}

// A page whose turn the snapshot shows polls on it, and when the answer
// still says it waits, again only at its next read of the snapshot, as
// static/app.js does: about once a refresh, not as fast as the edge
// answers (which earned honest shoppers the tarpit's poll limit).
func TestShopperPollsOnItsTurnOncePerRead(t *testing.T) {
	edge := &waitingEdge{}
	srv := httptest.NewServer(edge)
	defer srv.Close()
	c, err := newClient(srv.URL, 4, 5*time.Second, newRecorder(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	const refresh, run = 100 * time.Millisecond, time.Second
	s := &sim{edge: c, cdn: newCDN(c, "/v1/sales/s"), sale: "s", zero: time.Now()}
	s.cfg.PageRefreshS, s.cfg.PageWatch = refresh.Seconds(), true
	sh := &shopper{account: "shopper-00042", ip: "192.0.2.1", userToken: "ut", rng: rand.New(rand.NewPCG(1, 2))}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	s.shop(ctx, sh)
	// One poll a refresh, and the told ones (every 500ms) between them.
	if n, most := edge.polls.Load(), int64(run/refresh+run/(500*time.Millisecond)+1); n < 2 || n > most {
		t.Errorf("%d status polls in %v with the turn shown and every answer waiting, want 2 to %d", n, run, most)
	}
}
