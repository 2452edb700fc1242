package httpapi

import "strings"

// Routes are matched by path segments: a pattern is a list of segments,
// each a literal, "*" (one non-empty segment, returned as a parameter) or,
// last, "**" (one or more segments, returned joined as one parameter).

// matchesPath reports whether MatchPath would match pattern to segs.
func matchesPath(pattern, segs []string) bool {
	for i, p := range pattern {
		switch {
		case p == "**":
			return i < len(segs)
		case i >= len(segs):
			return false
		case p == "*":
			if segs[i] == "" {
				return false
			}
		case p != segs[i]:
			return false
		}
	}
	return len(pattern) == len(segs)
}

// SplitPath appends the "/"-separated segments of p to dst, as strings.Split
// would return them.
func SplitPath(p string, dst []string) []string {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(dst, p)
		}
		dst = append(dst, p[:i])
		p = p[i+1:]
	}
}

// MatchPath matches pattern to a path's segments and returns the
// parameters its "*" and "**" segments took.
func MatchPath(pattern, segs []string) ([]string, bool) {
	if !matchesPath(pattern, segs) {
		return nil, false // most routes: decided without allocating
	}
	var params []string
	for i, p := range pattern {
		if p == "**" {
			return append(params, strings.Join(segs[i:], "/")), i < len(segs)
		}
		if i >= len(segs) {
			return nil, false
		}
		switch {
		case p == "*":
			if segs[i] == "" {
				return nil, false
			}
			params = append(params, segs[i])
		case p != segs[i]:
			return nil, false
		}
	}
	return params, len(pattern) == len(segs)
}
