package line

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/tokens"
)

// Row is the origin's durable copy of a sale's line (its /v1/lines answer).
type Row struct {
	SaleID          string  `json:"sale_id"`
	Seed            string  `json:"seed"` // hex
	RatePerSecond   float64 `json:"rate_per_s"`
	Paused          bool    `json:"paused"`
	ChallengeBits   int     `json:"challenge_bits"`
	SettingsVersion int64   `json:"settings_version"`
	PreCeiling      int64   `json:"pre_ceiling"`
	PostCeiling     int64   `json:"post_ceiling"`
	ServingCeiling  int64   `json:"serving_ceiling"`
	// ServingRaised is the highest serving ceiling the origin took at this
	// settings version: it never lowers the serving ceiling below it.
	ServingRaised int64  `json:"serving_raised"`
	DrawSize      *int64 `json:"draw_size"` // nil until sealed
	// Autotune: the origin's controller sets the rate within the bounds
	// (origin/internal/autotune); not part of Redis's settings.
	Autotune    bool    `json:"autotune"`
	AutotuneMin float64 `json:"autotune_min_rate_per_s"`
	AutotuneMax float64 `json:"autotune_max_rate_per_s"`
}

// Proposal is what an edge proposes when it creates a line: the first
// proposal the origin records wins.
type Proposal struct {
	Seed          string  `json:"seed"` // hex, 32 bytes
	RatePerSecond float64 `json:"rate_per_s"`
	Paused        bool    `json:"paused"`
}

// Store is the origin's durable copy of the lines.
type Store interface {
	// Line reads the line as stored.
	Line(ctx context.Context, sale string) (Row, error)
	// Ensure creates the line with p unless it exists, and returns it as
	// stored.
	Ensure(ctx context.Context, sale string, p Proposal) (Row, error)
	// Settings changes what c names; the origin orders changes as they
	// reach it, bumping the version.
	Settings(ctx context.Context, sale string, c Change) (Row, error)
	// Raise raises the ceilings given (0 leaves one), never lowering any;
	// the serving ceiling only while the settings version is
	// c.SettingsVersion (the row answered says which it is).
	Raise(ctx context.Context, sale string, c Ceilings) (Row, error)
	// LowerServing reports that Redis held serving ceiling ceiling at
	// settings version version: while that version is in force the origin
	// lowers its serving ceiling to it, or to the highest raise it took at
	// that version if more.
	LowerServing(ctx context.Context, sale string, version, ceiling int64) (Row, error)
	// SealDraw records the pre-queue's size at the start unless recorded.
	SealDraw(ctx context.Context, sale string, size int64) (Row, error)
}

// OriginError is an answer of the origin other than 200.
type OriginError struct {
	Status int
	Code   string
}

func (e *OriginError) Error() string { return fmt.Sprintf("origin answered %d %s", e.Status, e.Code) }

// OriginStore is Store over the origin's public listener, every request
// signed with the token key set's active key for the origin's audience
// (tokens.RequestSigner). It has a connection pool of its own, so reserves
// filling theirs never hold up a ceiling raise.
type OriginStore struct {
	client  *fasthttp.HostClient
	host    string
	signer  *tokens.RequestSigner
	timeout time.Duration
}

var _ Store = (*OriginStore)(nil)

// originConns caps the connections of the line's calls: a few per sale a
// second at most. A call that finds them all busy waits (within its timeout)
// rather than fails, so a ceiling raise queued behind the syncs still lands.
const originConns = 8

// NewOriginStore returns a Store at base (http or https, no path), its
// requests signed with keys' active key for audience ("" means base's
// host, as the request's Host header names it); timeout bounds one
// exchange (0 means 2 s).
func NewOriginStore(base string, keys *tokens.KeySet, audience string, timeout time.Duration) (*OriginStore, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("line: origin %q must be an http(s) URL", base)
	}
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	if audience == "" {
		audience = u.Host
	}
	signer := tokens.NewRequestSigner(keys, audience, nil)
	addr := u.Host
	switch {
	case u.Port() != "":
	case u.Scheme == "https":
		addr += ":443"
	default:
		addr += ":80"
	}
	return &OriginStore{
		client: &fasthttp.HostClient{
			Addr: addr, IsTLS: u.Scheme == "https", MaxConns: originConns, MaxConnWaitTimeout: timeout,
			ReadTimeout: timeout, WriteTimeout: timeout, MaxIdleConnDuration: 30 * time.Second,
			MaxResponseBodySize: 64 << 10, NoDefaultUserAgentHeader: true,
			RetryIfErr: func(req *fasthttp.Request, attempts int, _ error) (bool, bool) {
				// The origin refuses a signature it has seen: a retry is a
				// request of its own, signed again. Every line route may
				// run twice (each only ever raises, or sets what it sets).
				if attempts >= originAttempts {
					return false, false
				}
				req.Header.Set(tokens.RequestSignatureHeader, signer.Sign(string(req.Header.Method()), string(req.URI().Path()), req.Body()))
				return false, true
			},
		},
		host: u.Host, signer: signer, timeout: timeout,
	}, nil
}

// originAttempts bounds the tries of one exchange whose connection failed
// (a keep-alive connection the origin closed, most often).
const originAttempts = 2

// Line implements Store.
func (o *OriginStore) Line(ctx context.Context, sale string) (Row, error) {
	return o.call(ctx, fasthttp.MethodGet, "/v1/lines/"+sale, nil)
}

// Ensure implements Store.
func (o *OriginStore) Ensure(ctx context.Context, sale string, p Proposal) (Row, error) {
	return o.call(ctx, fasthttp.MethodPost, "/v1/lines/"+sale, p)
}

// Change is a change of a sale's admission settings: each field not nil
// is set.
type Change struct {
	RatePerSecond *float64 `json:"rate_per_s,omitempty"`
	Paused        *bool    `json:"paused,omitempty"`
	ChallengeBits *int     `json:"challenge_bits,omitempty"`
	// Autotune switches the origin's admission controller on or off; its
	// bounds come together, and with it switched on. A rate without it
	// switches it off.
	Autotune    *bool    `json:"autotune,omitempty"`
	AutotuneMin *float64 `json:"autotune_min_rate_per_s,omitempty"`
	AutotuneMax *float64 `json:"autotune_max_rate_per_s,omitempty"`
	// Actor is who makes the change, as the origin keeps it with the
	// change for the ops dashboard (the admin token, the address, the
	// operator's name); not a setting.
	Actor string `json:"actor,omitempty"`
}

// Settings implements Store.
func (o *OriginStore) Settings(ctx context.Context, sale string, c Change) (Row, error) {
	return o.call(ctx, fasthttp.MethodPut, "/v1/lines/"+sale+"/settings", c)
}

// Raise implements Store.
func (o *OriginStore) Raise(ctx context.Context, sale string, c Ceilings) (Row, error) {
	body := map[string]int64{}
	for name, v := range map[string]int64{"pre": c.Pre, "post": c.Post, "serving": c.Serving} {
		if v > 0 {
			body[name] = v
		}
	}
	if c.Serving > 0 {
		body["settings_version"] = c.SettingsVersion
	}
	return o.call(ctx, fasthttp.MethodPost, "/v1/lines/"+sale+"/ceilings", body)
}

// LowerServing implements Store.
func (o *OriginStore) LowerServing(ctx context.Context, sale string, version, ceiling int64) (Row, error) {
	return o.call(ctx, fasthttp.MethodPost, "/v1/lines/"+sale+"/serving",
		map[string]int64{"settings_version": version, "ceiling": ceiling})
}

// SealDraw implements Store.
func (o *OriginStore) SealDraw(ctx context.Context, sale string, size int64) (Row, error) {
	return o.call(ctx, fasthttp.MethodPost, "/v1/lines/"+sale+"/draw", map[string]int64{"pre_queue": size})
}

// Changes reads the sale's last admission changes as the origin keeps them
// (GET /v1/lines/{sale}/changes), for the ops dashboard.
func (o *OriginStore) Changes(ctx context.Context, sale string) (json.RawMessage, error) {
	return o.exchange(ctx, fasthttp.MethodGet, "/v1/lines/"+sale+"/changes", nil)
}

// Books reads the sale's books as the origin's ledger holds them (GET
// /v1/lines/{sale}/books), for the ops dashboard.
func (o *OriginStore) Books(ctx context.Context, sale string) (json.RawMessage, error) {
	return o.exchange(ctx, fasthttp.MethodGet, "/v1/lines/"+sale+"/books", nil)
}

// AdminChange is an admin change other than a sale's admission settings
// (those go with Settings), as the origin keeps it for the ops dashboard
// (POST /v1/admin-changes): who makes it, as Change.Actor names them, what
// ("defences", "tarpit_release", either with "_failed" when it did not
// land or "_unknown" when the edge could not tell), and the state before
// and after as JSON objects (nil: none).
type AdminChange struct {
	Actor  string          `json:"actor"`
	What   string          `json:"what"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// RecordAdminChange has the origin keep c. A try whose connection failed
// is sent again (NewOriginStore), so an answer lost on the way may leave
// the change kept twice: a record too many, never one too few.
func (o *OriginStore) RecordAdminChange(ctx context.Context, c AdminChange) error {
	_, err := o.exchange(ctx, fasthttp.MethodPost, "/v1/admin-changes", c)
	return err
}

// AdminChanges reads the last admin changes as the origin keeps them (GET
// /v1/admin-changes), for the ops dashboard.
func (o *OriginStore) AdminChanges(ctx context.Context) (json.RawMessage, error) {
	return o.exchange(ctx, fasthttp.MethodGet, "/v1/admin-changes", nil)
}

// call sends one signed request and decodes the line it answers.
func (o *OriginStore) call(ctx context.Context, method, path string, in any) (Row, error) {
	body, err := o.exchange(ctx, method, path, in)
	if err != nil {
		return Row{}, err
	}
	var row Row
	if err := json.Unmarshal(body, &row); err != nil {
		return Row{}, fmt.Errorf("%s %s: answer: %w", method, path, err)
	}
	return row, nil
}

// exchange sends one signed request and returns the body of its 200
// answer (an *OriginError for any other).
func (o *OriginStore) exchange(ctx context.Context, method, path string, in any) ([]byte, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = b
	}
	timeout := o.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%s %s: %w", method, path, context.DeadlineExceeded)
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.SetHost(o.host)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	req.Header.Set(tokens.RequestSignatureHeader, o.signer.Sign(method, path, body))
	if err := o.client.DoTimeout(req, resp, timeout); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(resp.Body(), &e)
		return nil, fmt.Errorf("%s %s: %w", method, path, &OriginError{Status: resp.StatusCode(), Code: e.Error})
	}
	return append([]byte(nil), resp.Body()...), nil
}
