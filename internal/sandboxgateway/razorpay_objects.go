package sandboxgateway

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// The Razorpay objects the personality renders from the core's, as
// Razorpay's entity pages show them. Each is derived from an intent (and
// its Params, the link request's fields) when rendered.

// RazorpayVPA is the UPI VPA the Razorpay personality reports for payer
// (see Intent.Payer): what follows "upi:" for a UPI payer
// ("upi:alice@okbank" pays from alice@okbank), and for any other payer a
// VPA of its own, payer-<16 hex digits of its SHA-256>@sandbox, so that
// one payer is always one VPA. The origin's adapter names the payer
// "upi:" and the VPA, lower-cased.
func RazorpayVPA(payer string) string {
	if vpa, ok := strings.CutPrefix(payer, "upi:"); ok && vpa != "" {
		return vpa
	}
	sum := sha256.Sum256([]byte("flashgate-sandbox-vpa:" + payer))
	return "payer-" + hex.EncodeToString(sum[:8]) + "@sandbox"
}

// razorpayLinkStatus is an intent's Payment Link status.
func razorpayLinkStatus(in Intent) string {
	switch {
	case in.Status == StatusSucceeded:
		return "paid"
	case in.Status == StatusFailed && in.Closed:
		return "cancelled"
	case in.Status == StatusFailed:
		return "expired"
	}
	return "created"
}

// unixOrZero is t in Unix seconds, 0 for the zero time (Razorpay's "none").
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// razorpayLink is an intent as a Payment Link entity.
func razorpayLink(in Intent) map[string]any {
	p := paramsOf(in.Params)
	hex := razorpayHex(in.ID)
	status := razorpayLinkStatus(in)
	var amountPaid, cancelledAt, expiredAt int64
	var payments any // null until paid, as Razorpay answers a new link
	orderID := any(nil)
	switch status {
	case "paid":
		amountPaid = in.AmountMinor
		orderID = razorpayOrderPrefix + hex
		payments = []any{map[string]any{
			"amount":     in.AmountMinor,
			"created_at": unixOrZero(in.SettledAt),
			"method":     "upi",
			"payment_id": razorpayPaymentPrefix + hex,
			"plink_id":   in.ID,
			"status":     "captured",
			"updated_at": unixOrZero(in.SettledAt),
		}}
	case "cancelled":
		cancelledAt = unixOrZero(in.SettledAt)
	case "expired":
		expiredAt = unixOrZero(in.SettledAt)
	}
	l := map[string]any{
		"id":                       in.ID,
		"accept_partial":           false,
		"amount":                   in.AmountMinor,
		"amount_paid":              amountPaid,
		"currency":                 in.Currency,
		"description":              p.Get("description"),
		"reference_id":             p.Get("reference_id"),
		"status":                   status,
		"short_url":                in.PayURL,
		"upi_link":                 p.Get("upi_link") == "true",
		"reminder_enable":          p.Get("reminder_enable") == "true",
		"reminders":                []any{},
		"expire_by":                unixOrZero(in.ExpiresAt),
		"expired_at":               expiredAt,
		"cancelled_at":             cancelledAt,
		"first_min_partial_amount": 0,
		"notes":                    razorpayNotes(in.Metadata),
		"notify":                   map[string]any{"email": p.Get("notify[email]") == "true", "sms": p.Get("notify[sms]") == "true", "whatsapp": false},
		"customer":                 razorpayCustomer(paramsUnder(p, "customer")),
		"payments":                 payments,
		"order_id":                 orderID,
		"user_id":                  "",
		"whatsapp_link":            false,
		"created_at":               in.CreatedAt.Unix(),
		"updated_at":               in.UpdatedAt.Unix(),
	}
	if p.Has("callback_url") {
		l["callback_url"], l["callback_method"] = p.Get("callback_url"), p.Get("callback_method")
	}
	return l
}

// razorpayNotes is a notes object: [] when empty, as Razorpay sends it.
func razorpayNotes(m map[string]string) any {
	if len(m) == 0 {
		return []any{}
	}
	return m
}

// razorpayCustomer is a link's customer: [] when none was given.
func razorpayCustomer(c map[string]string) any {
	if len(c) == 0 {
		return []any{}
	}
	return c
}

// razorpayOrder is the Order of a paid link, as payment_link.paid carries
// it.
func razorpayOrder(in Intent) map[string]any {
	p := paramsOf(in.Params)
	return map[string]any{
		"id":              razorpayOrderPrefix + razorpayHex(in.ID),
		"entity":          "order",
		"amount":          in.AmountMinor,
		"amount_paid":     in.AmountMinor,
		"amount_due":      0,
		"attempts":        1,
		"authorized":      true,
		"currency":        in.Currency,
		"method":          "upi",
		"notes":           razorpayNotes(in.Metadata),
		"partial_payment": false,
		"payment_capture": true,
		"product_id":      razorpayHex(in.ID),
		"product_type":    "payment_link_v2",
		"public_key":      RazorpayKeyID,
		"receipt":         p.Get("reference_id"),
		"status":          "paid",
		"created_at":      in.CreatedAt.Unix(),
		"updated_at":      unixOrZero(in.SettledAt),
	}
}

// razorpayPayment is the captured Payment of a paid link, as of in: its
// refunds but the failed ones counted in amount_refunded, refunded once
// in full.
func razorpayPayment(in Intent) map[string]any {
	hex := razorpayHex(in.ID)
	done := refunded(in.Refunds)
	status, refundStatus := "captured", any(nil)
	switch {
	case done >= in.AmountMinor:
		status, refundStatus = "refunded", "full"
	case done > 0:
		refundStatus = "partial"
	}
	vpa := RazorpayVPA(in.Payer)
	return map[string]any{
		"id":                 razorpayPaymentPrefix + hex,
		"entity":             "payment",
		"amount":             in.AmountMinor,
		"base_amount":        in.AmountMinor,
		"currency":           in.Currency,
		"status":             status,
		"order_id":           razorpayOrderPrefix + hex,
		"invoice_id":         nil,
		"international":      false,
		"method":             "upi",
		"amount_refunded":    done,
		"amount_transferred": 0,
		"refund_status":      refundStatus,
		"captured":           true,
		"description":        "#" + hex,
		"card_id":            nil,
		"card":               nil,
		"bank":               nil,
		"wallet":             nil,
		"vpa":                vpa,
		"upi":                map[string]any{"payer_account_type": "bank_account", "vpa": vpa},
		"email":              "void@razorpay.com",
		"contact":            "+919000090000",
		"notes":              razorpayNotes(in.Metadata),
		"fee":                0,
		"tax":                0,
		"error_code":         nil,
		"error_description":  nil,
		"error_source":       nil,
		"error_step":         nil,
		"error_reason":       nil,
		"acquirer_data":      map[string]any{"rrn": hex[:12]},
		"created_at":         unixOrZero(in.SettledAt),
	}
}

// razorpayRefundStatus is a refund's Refund status.
var razorpayRefundStatus = map[string]string{RefundPending: "pending", RefundSucceeded: "processed", RefundFailed: "failed"}

// razorpayRefund is a refund of a paid link's payment as a Refund entity,
// in its current status.
func razorpayRefund(in Intent, re Refund) map[string]any {
	p := paramsOf(re.Params)
	speed := p.Get("speed")
	if speed == "" {
		speed = "normal"
	}
	return map[string]any{
		"id":              razorpayRefundPrefix + strings.TrimPrefix(re.ID, coreRefundPrefix),
		"entity":          "refund",
		"amount":          re.AmountMinor,
		"currency":        in.Currency,
		"payment_id":      razorpayPaymentPrefix + razorpayHex(in.ID),
		"notes":           razorpayNotes(paramsUnder(p, "notes")),
		"receipt":         param(p, "receipt"),
		"acquirer_data":   map[string]any{"arn": nil},
		"created_at":      re.CreatedAt.Unix(),
		"batch_id":        nil,
		"status":          razorpayRefundStatus[re.Status],
		"speed_processed": "normal",
		"speed_requested": speed,
	}
}
