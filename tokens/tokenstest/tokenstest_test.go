package tokenstest_test

import (
	"bytes"
	"testing"

	"github.com/flashgate/flashgate/tokens/tokenstest"
)

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
