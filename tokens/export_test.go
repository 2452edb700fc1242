package tokens

// SlowOnly returns a copy of v with the fast path disabled, for differential tests.
func SlowOnly(v *Verifier) *Verifier {
	w := *v
	w.slowOnly = true
	return &w
}
