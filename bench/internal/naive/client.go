package naive

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client drives a baseline server of another process (bench/naiveserver)
// through its admin routes: a new sale before each run, the books after.
type Client struct {
	url string
	hc  *http.Client
}

// NewClient is a client of the server at url (http://127.0.0.1:<port>).
// Each call has its own budget: 30 s for a reset, 10 s for the state.
func NewClient(url string) *Client {
	return &Client{url: strings.TrimSuffix(url, "/"), hc: &http.Client{}}
}

// Reset starts a new sale of stock units on the server.
func (c *Client) Reset(ctx context.Context, stock int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	status, _, err := c.do(ctx, http.MethodPost, "/naive/admin/reset?stock="+strconv.Itoa(stock))
	if err == nil && status != http.StatusNoContent {
		err = fmt.Errorf("status %d", status)
	}
	if err != nil {
		return fmt.Errorf("naive: reset %s: %w", c.url, err)
	}
	return nil
}

// State reads the server's books.
func (c *Client) State(ctx context.Context) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var st State
	status, body, err := c.do(ctx, http.MethodGet, "/naive/admin/state")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d", status)
	}
	if err == nil {
		err = json.Unmarshal(body, &st)
	}
	if err != nil {
		return State{}, fmt.Errorf("naive: state of %s: %w", c.url, err)
	}
	return st, nil
}

func (c *Client) do(ctx context.Context, method, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, body, err
}
