package api

import (
	"context"
	"net/netip"
	"strconv"

	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/edge/internal/defence"
	"github.com/flashgate/flashgate/internal/httpapi"
)

// The limits' names: the limit label of flashgate_edge_limited_total (which
// limit refused a request) and of flashgate_edge_limit_keys_evicted_total.
const (
	LimitJoinIP           = "join_ip"
	LimitJoinSubnet       = "join_subnet"
	LimitJoinAccount      = "join_account"
	LimitPollIP           = "poll_ip"
	LimitPollSubnet       = "poll_subnet"
	LimitPollAccount      = "poll_account"
	LimitReserveIP        = "reserve_ip"
	LimitReserveAccount   = "reserve_account"
	LimitOrderAccount     = "order_account"
	LimitOrderReadAccount = "order_read_account"
	LimitWebhookIP        = "webhook_ip"
)

// named is each limit by its name.
func (l Limits) named() map[string]*limiter.Limiter {
	return map[string]*limiter.Limiter{
		LimitJoinIP: l.JoinIP, LimitJoinAccount: l.JoinAccount,
		LimitPollIP: l.PollIP, LimitPollAccount: l.PollAccount,
		LimitReserveIP: l.ReserveIP, LimitReserveAccount: l.ReserveAccount,
		LimitOrderAccount: l.OrderAccount, LimitOrderReadAccount: l.OrderReadAccount, LimitWebhookIP: l.WebhookIP,
	}
}

// limit counts one request against each limiter under its key, in order,
// and answers 429 rate_limited, with Retry-After and X-RateLimit-* headers,
// at the first that is reached; the checks after it count nothing. So
// callers check the account before the address, and the address before its
// subnet: an account over its limit does not use up the budget of the
// address it shares with others (a household, an office behind one NAT),
// nor one address the budget of its network. A request let through carries
// the X-RateLimit-* headers of the limit with the least left, the one it
// will meet first. A limiter that fails lets the request through: the
// limits shed abuse, they are not the sale's correctness.
func (s *Server) limit(ctx *fasthttp.RequestCtx, checks ...limitCheck) error {
	var tightest limiter.Context
	checked := false
	for _, c := range checks {
		if c.l == nil {
			continue
		}
		lc, err := c.l.Get(context.Background(), c.key)
		if err != nil {
			s.Log.Warn("rate limiter failed", "limit", c.name, "err", err)
			continue
		}
		if lc.Reached {
			setRateLimitHeaders(&ctx.Response.Header, lc)
			s.metrics.limited(c.name).Inc()
			if c.account != "" && s.Defences != nil {
				s.Defences.Offence(c.account, c.name) // flooding joins, polling far faster than told
			}
			wait := max(lc.Reset-s.Clock.Now().Unix(), 1)
			return &httpapi.Error{
				Status: fasthttp.StatusTooManyRequests, Code: codeRateLimited,
				Message:    "Too many requests; slow down and try again in " + strconv.FormatInt(wait, 10) + " s.",
				RetryAfter: int(wait),
			}
		}
		if !checked || lc.Remaining < tightest.Remaining {
			tightest, checked = lc, true
		}
	}
	if checked {
		setRateLimitHeaders(&ctx.Response.Header, tightest)
	}
	return nil
}

// setRateLimitHeaders writes lc as X-RateLimit-Limit, -Remaining and -Reset.
func setRateLimitHeaders(h *fasthttp.ResponseHeader, lc limiter.Context) {
	var buf [20]byte
	h.SetCanonical(headerRateLimitLimit, strconv.AppendInt(buf[:0], lc.Limit, 10))
	h.SetCanonical(headerRateLimitRemaining, strconv.AppendInt(buf[:0], lc.Remaining, 10))
	h.SetCanonical(headerRateLimitReset, strconv.AppendInt(buf[:0], lc.Reset, 10))
}

// limitCheck is one limiter and the key a request counts under; a nil l
// checks nothing.
type limitCheck struct {
	name    string // the limit's name (LimitJoinIP, ...)
	l       *limiter.Limiter
	key     string
	account string // a per-account check's account, whose offence a refusal is
}

// byIP is a per-address check; addr is an addressKey.
func byIP(name string, l *limiter.Limiter, addr string) limitCheck {
	return limitCheck{name: name, l: l, key: "ip:" + addr}
}

// bySubnet is a per-subnet check of the client address a, the one the
// per-address key is made of (clientAddr's, so never a hop that is not an
// address). Its key is made only when l is set: an unset subnet limit costs
// the request nothing.
func bySubnet(name string, l *limiter.Limiter, a netip.Addr) limitCheck {
	if l == nil || !a.IsValid() {
		return limitCheck{}
	}
	return limitCheck{name: name, l: l, key: subnetKey(a)}
}

// subnetKey is the key of a per-subnet limit for the valid address a: its
// network (defence.Network), as "net:192.0.2.0/24" or "net:2001:db8:1::/48".
func subnetKey(a netip.Addr) string {
	var buf [len("net:") + len("ffff:ffff:ffff::/48")]byte
	return string(defence.Network(a).AppendTo(append(buf[:0], "net:"...)))
}

func byAccount(name string, l *limiter.Limiter, account string) limitCheck {
	return limitCheck{name: name, l: l, key: "acct:" + account, account: account}
}

// networkLimiters are the per-network limiters at the rates of one
// version of the defence settings; nil limiters are no limit.
type networkLimiters struct {
	version    int64
	join, poll *limiter.Limiter
}

// networkLimits returns the per-network limiters of the defence settings
// in force, made anew (over the same counts) when ops have changed them. A
// lower rate over the same counts refuses a network that was busy under
// the old one until the old period's counts run out (a minute at "-M").
func (s *Server) networkLimits() *networkLimiters {
	nl := s.networks.Load()
	if s.Defences == nil {
		return &networkLimiters{}
	}
	st := s.Defences.Settings()
	if nl != nil && nl.version == st.Version {
		return nl
	}
	next := &networkLimiters{version: st.Version,
		join: rated(s.Limits.JoinSubnet, st.Limits.JoinSubnet), poll: rated(s.Limits.PollSubnet, st.Limits.PollSubnet)}
	// A request holding older settings never replaces newer limiters.
	for cur := nl; cur == nil || cur.version < next.version; cur = s.networks.Load() {
		if s.networks.CompareAndSwap(cur, next) {
			break
		}
	}
	return next
}

// rated is a limiter counting in store at the rate formatted, nil when
// either is missing (settings are validated before they are taken).
func rated(store limiter.Store, formatted string) *limiter.Limiter {
	rate, err := defence.ParseRate(formatted)
	if store == nil || rate == nil || err != nil {
		return nil
	}
	return limiter.New(store, *rate)
}
