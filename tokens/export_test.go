package tokens

// SlowOnly returns a copy of v with the fast path disabled, for differential tests.
func SlowOnly(v *Verifier) *Verifier {
	w := *v
	w.slowOnly = true
	return &w
}

// SlowIssuer returns a copy of i that signs through golang-jwt only.
func SlowIssuer(i *Issuer) *Issuer {
	w := *i
	w.slowOnly = true
	return &w
}

// UserSlowOnly returns a copy of v with the fast path disabled.
func UserSlowOnly(v *UserVerifier) *UserVerifier {
	w := *v
	if w.fast != nil {
		f := &userFast{macs: w.fast.macs, issuer: w.fast.issuer, audience: w.fast.audience, now: w.fast.now, leeway: w.fast.leeway, slowOnly: true}
		w.fast = f
	}
	return &w
}

// UserHeaders returns the header segments v's fast path trusts.
func UserHeaders(v *UserVerifier) []string {
	if v.fast == nil || v.fast.headers.Load() == nil {
		return nil
	}
	return append([]string(nil), *v.fast.headers.Load()...)
}
