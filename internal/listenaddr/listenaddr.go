// Package listenaddr checks the listen addresses a binary is given before
// it opens them: the public and the admin listener must not share one, and
// dev mode listens on loopback only.
package listenaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Listener is one listen address and the name its errors give it.
type Listener struct {
	Name string // for errors: the variable that sets it, say FLASHGATE_EDGE_ADDR
	Addr string // host:port, as net.Listen takes it
}

// Distinct returns an error when two of ls would listen on the same port of
// the same address (a wildcard host such as ":8080" covers every address),
// naming both. Port 0 (any free port) never clashes.
func Distinct(ls ...Listener) error {
	for i, a := range ls {
		for _, b := range ls[i+1:] {
			if overlap(a.Addr, b.Addr) {
				return fmt.Errorf("config: %s (%s) and %s (%s) are one address: each listener needs its own", a.Name, a.Addr, b.Name, b.Addr)
			}
		}
	}
	return nil
}

func overlap(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b // net.Listen will refuse them itself
	}
	if pa != pb || pa == "0" {
		return false
	}
	return wildcard(ha) || wildcard(hb) || sameHost(ha, hb)
}

func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || (err == nil && ip.IsUnspecified())
}

func sameHost(a, b string) bool {
	ia, errA := netip.ParseAddr(a)
	ib, errB := netip.ParseAddr(b)
	if errA == nil && errB == nil {
		return ia.Unmap() == ib.Unmap()
	}
	return strings.EqualFold(a, b)
}

// Loopback reports whether addr listens on a loopback address only:
// 127.0.0.0/8, ::1 or "localhost". An empty host means every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// NotLoopback returns the listeners of ls that are not Loopback.
func NotLoopback(ls ...Listener) []Listener {
	var out []Listener
	for _, l := range ls {
		if !Loopback(l.Addr) {
			out = append(out, l)
		}
	}
	return out
}

// DevAnyInterfaceEnv is the variable that lets dev mode listen beyond
// loopback.
const DevAnyInterfaceEnv = "FLASHGATE_DEV_ALLOW_NON_LOOPBACK"

// Check is a binary's start-up check of its listeners: none may share an
// address, and in dev mode (whose endpoints hand out tokens for any
// account) each must be loopback unless devAnyInterface allows otherwise —
// which it then returns as a warning to log.
func Check(dev, devAnyInterface bool, ls ...Listener) (warnings []string, err error) {
	if err := Distinct(ls...); err != nil {
		return nil, err
	}
	if !dev {
		return nil, nil
	}
	open := NotLoopback(ls...)
	if len(open) == 0 {
		return nil, nil
	}
	names := make([]string, len(open))
	for i, l := range open {
		names[i] = fmt.Sprintf("%s=%s", l.Name, l.Addr)
	}
	list := strings.Join(names, ", ")
	if !devAnyInterface {
		return nil, fmt.Errorf("config: dev mode listens on loopback addresses only (127.0.0.1:port), not %s; "+
			"set %s=1 to allow it on a network you trust", list, DevAnyInterfaceEnv)
	}
	return []string{fmt.Sprintf("DEV MODE LISTENS BEYOND LOOPBACK (%s=1): %s; anyone who reaches these addresses can get tokens for any account", DevAnyInterfaceEnv, list)}, nil
}
