package challenge

import "strings"

// fields are a parsed challenge; the strings share its memory.
type fields struct {
	kid, sale string
	window    int64 // Unix seconds
	bits      int
	nonce     string
	mac       string
	signed    string // the challenge up to the dot before mac: what mac covers
}

// parse reads a challenge in the v1 form (package doc), strictly: every
// field within its bounds and charset, numbers without leading zeros, so a
// challenge has one spelling. It does not allocate.
func parse(s string) (fields, bool) {
	if len(s) > MaxChallengeLen || !strings.HasPrefix(s, version) {
		return fields{}, false
	}
	var f fields
	var windowText, bitsText string
	rest, mac, ok1 := cutLast(s[len(version):])
	rest, nonce, ok2 := cutLast(rest)
	rest, bitsText, ok3 := cutLast(rest)
	rest, windowText, ok4 := cutLast(rest)
	kid, sale, ok5 := cutLast(rest)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return fields{}, false
	}
	window, okW := decimal(windowText, maxWindowDigits)
	bits, okB := decimal(bitsText, maxBitsDigits)
	if !okW || !okB || bits > MaxDifficultyBits || !validKID(kid) || !validSale(sale) ||
		!base64URL(nonce, nonceB64Len) || !base64URL(mac, macB64Len) {
		return fields{}, false
	}
	f.kid, f.sale, f.window, f.bits, f.nonce, f.mac = kid, sale, window, int(bits), nonce, mac
	f.signed = s[:len(s)-len(mac)-1]
	return f, true
}

// cutLast splits s around its last dot.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// decimal parses 1 to maxDigits decimal digits without a leading zero ("0"
// itself is fine).
func decimal(s string, maxDigits int) (int64, bool) {
	if s == "" || len(s) > maxDigits || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// validKID: [A-Za-z0-9._-]{1,32}, as tokens.KeySet allows.
func validKID(s string) bool {
	if s == "" || len(s) > maxKIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idChar(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

// validSale: [A-Za-z0-9_-]{1,64}, as the API's sale ids (httpapi.ValidID).
func validSale(s string) bool {
	if s == "" || len(s) > maxSaleLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idChar(s[i]) {
			return false
		}
	}
	return true
}

// base64URL: exactly n characters of the base64url alphabet (no padding).
func base64URL(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idChar(s[i]) {
			return false
		}
	}
	return true
}

// validSolution: 1 to MaxSolutionLen decimal digits.
func validSolution(s string) bool {
	if s == "" || len(s) > MaxSolutionLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// idChar: [A-Za-z0-9_-], which is also the base64url alphabet.
func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
