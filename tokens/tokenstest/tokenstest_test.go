package tokenstest_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/flashgate/flashgate/tokens/tokenstest"
)

func TestClock(t *testing.T) {
	c := tokenstest.NewClock(time.Time{})
	if got := c.Now(); !got.Equal(tokenstest.Start()) {
		t.Fatalf("NewClock(zero).Now() = %v, want %v", got, tokenstest.Start())
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), tokenstest.Start().Add(90*time.Second); !got.Equal(want) {
		t.Errorf("Now() after Advance(90s) = %v, want %v", got, want)
	}
	at := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if got := tokenstest.NewClock(at).Now(); !got.Equal(at) {
		t.Errorf("NewClock(%v).Now() = %v", at, got)
	}
}

func TestFixedKeys(t *testing.T) {
	if a, b := tokenstest.KeySet().String(), tokenstest.KeySet().String(); a != b {
		t.Errorf("KeySet() differs between calls: %q vs %q", a, b)
	}
	if k := tokenstest.KeySet(); k.ActiveKID() != "test1" {
		t.Errorf("KeySet().ActiveKID() = %q, want test1", k.ActiveKID())
	}
	if k := tokenstest.OtherKeySet(); k.ActiveKID() == "test1" || k.String() == tokenstest.KeySet().String() {
		t.Errorf("OtherKeySet() = %v, want a different kid and secret", k)
	}
	s := tokenstest.UserSecret()
	if len(s) < 32 {
		t.Errorf("len(UserSecret()) = %d, want >= 32", len(s))
	}
	s[0] ^= 0xff
	if bytes.Equal(s, tokenstest.UserSecret()) {
		t.Error("UserSecret() returned shared storage, want a copy")
	}
}
