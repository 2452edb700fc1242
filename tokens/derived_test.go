package tokens_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/flashgate/flashgate/tokens"
)

// TestIssuerDerivedKey: an Issuer derives a label's key from the active
// key, as KeySet.DerivedKeys does (HMAC-SHA256 of the label): the same on
// every node of the key set, another for another label or active key.
func TestIssuerDerivedKey(t *testing.T) {
	keys, err := tokens.NewKeySet("new", map[string][]byte{"new": secretA, "old": secretB})
	if err != nil {
		t.Fatal(err)
	}
	issuer := tokens.NewIssuer(keys, tokens.IssuerOptions{})
	got := issuer.DerivedKey("admission-log")
	m := hmac.New(sha256.New, secretA)
	m.Write([]byte("admission-log"))
	if want := m.Sum(nil); !bytes.Equal(got, want) {
		t.Errorf("DerivedKey(admission-log) = %x, want HMAC-SHA256(active secret, label) %x", got, want)
	}
	if want := keys.DerivedKeys("admission-log")["new"]; !bytes.Equal(got, want) {
		t.Errorf("DerivedKey(admission-log) = %x, want DerivedKeys of the active kid %x", got, want)
	}
	if other := issuer.DerivedKey("challenge"); bytes.Equal(got, other) {
		t.Errorf("DerivedKey gives one key for two labels: %x", got)
	}
	rotated, err := tokens.NewKeySet("old", map[string][]byte{"new": secretA, "old": secretB})
	if err != nil {
		t.Fatal(err)
	}
	if other := tokens.NewIssuer(rotated, tokens.IssuerOptions{}).DerivedKey("admission-log"); bytes.Equal(got, other) {
		t.Errorf("DerivedKey is the same under another active key: %x", got)
	}
}
