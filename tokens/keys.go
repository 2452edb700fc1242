package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// MinSecretLen is the shortest HMAC secret accepted, in bytes (256 bits, as
// RFC 7518 requires for HS256).
const MinSecretLen = 32

// maxKIDLen is the longest key id accepted, in characters.
const maxKIDLen = 32

// KeySet holds the HMAC secrets that sign and verify the tokens we issue, each
// named by a key id (the JWT "kid" header). The active key signs; every key in
// the set verifies, so a key can be rotated without a flag day: put the new key
// first, keep the old one until the tokens it signed have expired, then drop it.
//
// A KeySet is immutable once built and safe for concurrent use. Its String form
// contains the secrets: never log it. Formatting it with fmt verbs (%v, %s, ...)
// prints only the key ids.
type KeySet struct {
	active  string
	order   []string          // every kid, active first: the spec order
	secrets map[string][]byte // kid -> secret, each at least MinSecretLen bytes
}

// NewKeySet builds a key set from secrets (kid -> HMAC secret) that signs with
// activeKID. Every kid must match [A-Za-z0-9._-]{1,32}, every secret must be at
// least MinSecretLen bytes, and activeKID must be one of the kids. The secrets
// are copied.
func NewKeySet(activeKID string, secrets map[string][]byte) (*KeySet, error) {
	if len(secrets) == 0 {
		return nil, errors.New("tokens: key set is empty")
	}
	if _, ok := secrets[activeKID]; !ok {
		return nil, fmt.Errorf("tokens: active kid %q is not in the key set", activeKID)
	}
	rest := make([]string, 0, len(secrets)-1)
	for kid := range secrets {
		if kid != activeKID {
			rest = append(rest, kid)
		}
	}
	slices.Sort(rest)
	k := &KeySet{
		active:  activeKID,
		order:   append([]string{activeKID}, rest...),
		secrets: make(map[string][]byte, len(secrets)),
	}
	for _, kid := range k.order {
		if err := k.add(kid, secrets[kid]); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// ParseKeySet parses the configuration form of a key set: comma-separated
// "kid:secret" entries with the secret in standard base64 (padding optional),
// for example "k2:BASE64,k1:BASE64". The first entry is the active signing key;
// the others only verify. Blanks around entries are ignored. Errors never
// contain secret material.
func ParseKeySet(spec string) (*KeySet, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("tokens: key set spec is empty")
	}
	entries := strings.Split(spec, ",")
	k := &KeySet{
		order:   make([]string, 0, len(entries)),
		secrets: make(map[string][]byte, len(entries)),
	}
	for n, entry := range entries {
		kid, b64, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok {
			return nil, fmt.Errorf("tokens: key set entry %d: want kid:base64-secret", n+1)
		}
		if err := validKID(kid); err != nil {
			return nil, fmt.Errorf("tokens: key set entry %d: %w", n+1, err)
		}
		secret, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(b64, "="))
		if err != nil {
			// err would quote part of the secret; report only where it is.
			return nil, fmt.Errorf("tokens: key set entry %d (kid %q): secret is not valid base64", n+1, kid)
		}
		if _, dup := k.secrets[kid]; dup {
			return nil, fmt.Errorf("tokens: key set entry %d: duplicate kid %q", n+1, kid)
		}
		if err := k.add(kid, secret); err != nil {
			return nil, err
		}
		k.order = append(k.order, kid)
	}
	k.active = k.order[0]
	return k, nil
}

// add validates and stores one key (a copy of secret).
func (k *KeySet) add(kid string, secret []byte) error {
	if err := validKID(kid); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if len(secret) < MinSecretLen {
		return fmt.Errorf("tokens: secret for kid %q is %d bytes, want at least %d", kid, len(secret), MinSecretLen)
	}
	k.secrets[kid] = slices.Clone(secret)
	return nil
}

// ActiveKID is the kid of the key that signs new tokens.
func (k *KeySet) ActiveKID() string { return k.active }

// KIDs lists every kid in the set, the active one first.
func (k *KeySet) KIDs() []string { return slices.Clone(k.order) }

// SharedSecret reports the kid of a key in k whose secret is secret, or is
// spelled secret in the set's spec form (standard base64, with or without
// padding): a secret another kind of token must not share. A user-token
// secret equal to a token key would make queue and admission tokens pass as
// user tokens; one equal to a key's base64 spelling hands the key to
// whoever holds the user-token secret.
func (k *KeySet) SharedSecret(secret []byte) (kid string, ok bool) {
	for _, kid := range k.order {
		key := k.secrets[kid]
		if subtle.ConstantTimeCompare(key, secret) == 1 ||
			subtle.ConstantTimeCompare([]byte(base64.StdEncoding.EncodeToString(key)), secret) == 1 ||
			subtle.ConstantTimeCompare([]byte(base64.RawStdEncoding.EncodeToString(key)), secret) == 1 {
			return kid, true
		}
	}
	return "", false
}

// DerivedKeys returns, by key id, HMAC-SHA256(secret, label) of every
// secret in the set: keys for MACs of other kinds than the tokens' own
// (a distinct label each), so that none of their MACs can ever be a token
// signature and no package outside this one holds the secrets.
func (k *KeySet) DerivedKeys(label string) map[string][]byte {
	out := make(map[string][]byte, len(k.order))
	for _, kid := range k.order {
		out[kid] = deriveKey(k.secrets[kid], label)
	}
	return out
}

// deriveKey is HMAC-SHA256(secret, label).
func deriveKey(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// String returns the set in ParseKeySet's form, active key first, so that it
// can be handed to another process (scripts, tests). It contains the secrets:
// never log it.
func (k *KeySet) String() string {
	var b strings.Builder
	for n, kid := range k.order {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kid)
		b.WriteByte(':')
		b.WriteString(base64.StdEncoding.EncodeToString(k.secrets[kid]))
	}
	return b.String()
}

// Format keeps secrets out of logs: every fmt verb prints only the key ids.
// Call String explicitly for the spec form.
func (k *KeySet) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "tokens.KeySet{active: %s, kids: %s}", k.active, strings.Join(k.order, ","))
}

// GenerateKeySpec returns a one-key spec for ParseKeySet with a fresh random
// secret of MinSecretLen bytes, for `make run`, scripts and rotation. To rotate,
// prepend its output to the current spec with a comma.
func GenerateKeySpec(kid string) (string, error) {
	if err := validKID(kid); err != nil {
		return "", fmt.Errorf("tokens: %w", err)
	}
	secret := make([]byte, MinSecretLen)
	if _, err := io.ReadFull(rand.Reader, secret); err != nil {
		return "", fmt.Errorf("tokens: generate secret: %w", err)
	}
	return kid + ":" + base64.StdEncoding.EncodeToString(secret), nil
}

// validKID checks kid against [A-Za-z0-9._-]{1,32}.
func validKID(kid string) error {
	if kid == "" || len(kid) > maxKIDLen {
		return fmt.Errorf("kid must be 1 to %d characters, got %d", maxKIDLen, len(kid))
	}
	for i := 0; i < len(kid); i++ {
		c := kid[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			// Not quoted back: a misordered spec entry could put a secret here.
			return errors.New("kid may only contain A-Z a-z 0-9 . _ -")
		}
	}
	return nil
}
