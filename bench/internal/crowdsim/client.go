package crowdsim

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// client sends one service's requests and records each.
type client struct {
	hc   *fasthttp.HostClient
	host string
	rec  *recorder
}

// newClient returns a client of base (http://host:port) with up to conns
// connections. Shoppers share them, as shoppers behind one CDN POP share
// its connections to the edge; conns is large enough that waiting for one
// is not what the run measures.
func newClient(base string, conns int, timeout time.Duration, rec *recorder) (*client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, errors.New("crowd: bad URL " + base)
	}
	return &client{
		host: u.Host,
		rec:  rec,
		hc: &fasthttp.HostClient{
			Addr:                      u.Host,
			MaxConns:                  conns,
			MaxConnWaitTimeout:        timeout,
			ReadTimeout:               timeout,
			WriteTimeout:              timeout,
			MaxIdemponentCallAttempts: 1, // the shopper decides what to retry
			MaxIdleConnDuration:       time.Minute,
		},
	}, nil
}

// request is one call to make.
type request struct {
	endpoint string
	method   string
	path     string
	token    string            // bearer token
	body     any               // JSON body, or nil
	header   map[string]string // more headers (X-Forwarded-For)
}

// reply is what came back: status 0 when nothing did.
type reply struct {
	status     int
	retryAfter time.Duration
	maxAge     time.Duration // from Cache-Control
	swr        time.Duration // Cache-Control's stale-while-revalidate
	nextAt     int64         // a snapshot's Flashgate-Next-At: the second to watch next (0: none)
	body       []byte
}

func (c *client) do(r request) reply {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(r.method)
	req.SetRequestURI("http://" + c.host + r.path)
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.body != nil {
		b, _ := json.Marshal(r.body)
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	sent := time.Now()
	err := c.hc.Do(req, resp)
	took := time.Since(sent)
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrNoFreeConns):
		c.rec.add(r.endpoint, sent, took, 0, timedOut)
		return reply{}
	case err != nil:
		c.rec.add(r.endpoint, sent, took, 0, transportError)
		return reply{}
	}
	out := reply{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...)}
	if s, err := strconv.Atoi(string(resp.Header.Peek("Retry-After"))); err == nil && s >= 0 {
		out.retryAfter = time.Duration(s) * time.Second
	}
	out.nextAt, _ = strconv.ParseInt(string(resp.Header.Peek("Flashgate-Next-At")), 10, 64)
	cc := resp.Header.Peek("Cache-Control")
	out.maxAge, out.swr = cacheSeconds(cc, "max-age="), cacheSeconds(cc, "stale-while-revalidate=")
	c.rec.add(r.endpoint, sent, took, out.status, answered)
	return out
}

// decode reads the reply's JSON body into v; a body that is not JSON leaves
// v as it was.
func (r reply) decode(v any) bool { return json.Unmarshal(r.body, v) == nil }

// cacheSeconds reads a Cache-Control directive of seconds, as "max-age=" N;
// 0 when absent.
func cacheSeconds(cc []byte, directive string) time.Duration {
	_, after, ok := strings.Cut(string(cc), directive)
	if !ok {
		return 0
	}
	n := 0
	for _, c := range after {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return time.Duration(n) * time.Second
}
