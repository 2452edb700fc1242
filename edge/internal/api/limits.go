package api

import (
	"context"
	"strconv"

	"github.com/ulule/limiter/v3"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/internal/httpapi"
)

// limit counts one request against each limiter under its key and answers
// 429 rate_limited, with Retry-After and X-RateLimit-* headers, once any is
// reached. A limiter that fails lets the request through: the limits shed
// abuse, they are not the sale's correctness.
func (s *Server) limit(ctx *fasthttp.RequestCtx, checks ...limitCheck) error {
	for _, c := range checks {
		if c.l == nil {
			continue
		}
		lc, err := c.l.Get(context.Background(), c.key)
		if err != nil {
			s.Log.Warn("rate limiter failed", "err", err)
			continue
		}
		h := &ctx.Response.Header
		var buf [20]byte
		h.SetCanonical(headerRateLimitLimit, strconv.AppendInt(buf[:0], lc.Limit, 10))
		h.SetCanonical(headerRateLimitRemaining, strconv.AppendInt(buf[:0], lc.Remaining, 10))
		h.SetCanonical(headerRateLimitReset, strconv.AppendInt(buf[:0], lc.Reset, 10))
		if lc.Reached {
			wait := max(lc.Reset-s.Clock().Unix(), 1)
			return &httpapi.Error{
				Status: fasthttp.StatusTooManyRequests, Code: codeRateLimited,
				Message:    "Too many requests; slow down and try again in " + strconv.FormatInt(wait, 10) + " s.",
				RetryAfter: int(wait),
			}
		}
	}
	return nil
}

type limitCheck struct {
	l   *limiter.Limiter
	key string
}

func byIP(l *limiter.Limiter, ip string) limitCheck { return limitCheck{l, "ip:" + ip} }

func byAccount(l *limiter.Limiter, account string) limitCheck {
	return limitCheck{l, "acct:" + account}
}
