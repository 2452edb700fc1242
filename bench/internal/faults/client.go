package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// outcome is how a request ended.
type outcome uint8

const (
	answered  outcome = iota
	hung              // no answer within the request timeout
	transport         // the connection failed (refused, reset): an answer of sorts, not a hang
)

// call is one request's record.
type call struct {
	endpoint string
	sent     time.Time
	took     time.Duration
	status   int    // 0 unless answered
	code     string // the error body's code, "" when none
	outcome  outcome
}

// recorder keeps every request of a scenario: a few thousand.
type recorder struct {
	mu    sync.Mutex // guards calls
	calls []call
}

func (r *recorder) add(c call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// reply is what came back; status 0 when nothing did.
type reply struct {
	status     int
	code       string
	retryAfter time.Duration
	body       []byte
}

func (r reply) decode(v any) bool { return json.Unmarshal(r.body, v) == nil }

// client sends requests with one budget each and records them.
type client struct {
	hc      *http.Client
	timeout time.Duration
	rec     *recorder
}

func newClient(timeout time.Duration, rec *recorder) *client {
	tr := &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &client{hc: &http.Client{Transport: tr, Timeout: timeout}, timeout: timeout, rec: rec}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// request is one call to make.
type request struct {
	endpoint string // the name it is recorded under
	method   string
	url      string
	token    string // bearer
	ip       string // X-Forwarded-For (the edge believes 127.0.0.1)
	body     any
	header   map[string]string // more request headers
}

func (c *client) do(ctx context.Context, r request) reply {
	var rd io.Reader
	if r.body != nil {
		b, _ := json.Marshal(r.body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url, rd)
	if err != nil {
		return reply{}
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.ip != "" {
		req.Header.Set("X-Forwarded-For", r.ip)
	}
	for name, value := range r.header {
		if value != "" {
			req.Header.Set(name, value)
		}
	}
	sent := time.Now()
	resp, err := c.hc.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	took := time.Since(sent)
	if err != nil {
		if ctx.Err() != nil {
			return reply{} // the run ended: not the stack's doing
		}
		o := transport
		if errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err) {
			o = hung
		}
		c.rec.add(call{endpoint: r.endpoint, sent: sent, took: took, outcome: o})
		return reply{}
	}
	out := reply{status: resp.StatusCode, body: body}
	if resp.StatusCode >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil {
			out.code = e.Error
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		out.retryAfter = time.Duration(s) * time.Second
	}
	c.rec.add(call{endpoint: r.endpoint, sent: sent, took: took, status: out.status, code: out.code, outcome: answered})
	return out
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// admin makes an admin call (bearer admin token), not recorded, with its
// own budget.
func admin(ctx context.Context, method, url string, body any) (int, []byte, error) {
	return unrecorded(ctx, adminToken, method, url, body)
}

// gatewayControl calls one of the sandbox gateway's /sandbox/ routes
// (bearer control token), not recorded, with its own budget.
func gatewayControl(ctx context.Context, method, url string, body any) (int, []byte, error) {
	return unrecorded(ctx, gatewayControlToken, method, url, body)
}

// unrecorded makes a call with a bearer token and a JSON body (nil: none)
// within 10 s, and returns the status and up to 8 MiB of the answer.
func unrecorded(ctx context.Context, token, method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}
