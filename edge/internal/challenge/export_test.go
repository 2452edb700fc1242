package challenge

import "strconv"

// Canonical parses s as a challenge and writes it back from its fields: the
// parser's round trip, for FuzzParse.
func Canonical(s string) (string, bool) {
	f, ok := parse(s)
	if !ok {
		return "", false
	}
	return version + f.kid + "." + f.sale + "." + strconv.FormatInt(f.window, 10) + "." + strconv.Itoa(f.bits) + "." +
		f.nonce + "." + f.mac, true
}
