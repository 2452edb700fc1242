package tokens_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flashgate/flashgate/tokens"
)

func TestCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{tokens.ErrMissing, "missing_token"},
		{tokens.ErrMalformed, "invalid_token"},
		{tokens.ErrExpired, "token_expired"},
		{tokens.ErrInvalid, "invalid_token"},
		{tokens.ErrWrongSale, "wrong_sale"},
		{tokens.ErrWrongAccount, "wrong_account"},
		{fmt.Errorf("queue token: %w", tokens.ErrExpired), "token_expired"},
		{fmt.Errorf("reserve: %w", fmt.Errorf("admission token: %w", tokens.ErrWrongSale)), "wrong_sale"},
		{errors.New("something else"), "invalid_token"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := tokens.Code(tt.err); got != tt.want {
				t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
