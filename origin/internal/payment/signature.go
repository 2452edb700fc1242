package payment

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Signature errors; both mean 401 to the sender.
var (
	ErrBadSignature   = errors.New("payment: webhook signature does not verify")
	ErrStaleSignature = errors.New("payment: webhook signature is outside the time tolerance")
)

// DefaultTolerance is how far a webhook's signed time may be from ours.
const DefaultTolerance = 5 * time.Minute

// VerifySignature checks a Payment-Signature header, "t=<unix>,v1=<hex>"
// with one or more v1 values, over body: some v1 must be the HMAC-SHA256,
// under one of secrets, of "<t>.<body>" (several secrets and values let a
// secret rotate without a flag day), and t must be within tolerance of now
// either way, so a captured delivery cannot be replayed later. Comparisons
// take constant time.
func VerifySignature(header string, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	mac := make([]byte, 0, sha256.Size)
	valid := false
	for _, secret := range secrets {
		h := hmac.New(sha256.New, secret)
		h.Write([]byte(ts))
		h.Write([]byte{'.'})
		h.Write(body)
		mac = h.Sum(mac[:0])
		for _, sig := range sigs {
			if hmac.Equal(mac, sig) {
				valid = true
			}
		}
	}
	if !valid {
		return ErrBadSignature
	}
	// Checked after the MAC, so the time cannot be forged to pass.
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrStaleSignature
	}
	return nil
}

// Sign returns the Payment-Signature header for body at t under each of
// secrets: what a gateway sends, and what tests use to forge deliveries.
func Sign(body []byte, t time.Time, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, secret := range secrets {
		h := hmac.New(sha256.New, secret)
		h.Write([]byte(ts + "."))
		h.Write(body)
		b.WriteString(",v1=" + hex.EncodeToString(h.Sum(nil)))
	}
	return b.String()
}
