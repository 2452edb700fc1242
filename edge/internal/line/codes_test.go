package line_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/edge/internal/admission"
	"github.com/flashgate/flashgate/edge/internal/edgetest"
	"github.com/flashgate/flashgate/edge/internal/line"
)

// TestLostIsOneReply: every script that needs the line whole answers each
// way of finding it lost that it checks with the one "lost" reply, which
// ScriptError turns into ErrLost, and changes nothing; once the line is
// restored the same calls go through. advance.lua is run through
// admission's Cursor, which reads its reply with ScriptError.
func TestLostIsOneReply(t *testing.T) {
	t.Parallel()
	r := edgetest.NewRedis(t)
	keys := line.NewKeys(r.Prefix)
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	scripts := map[string]func(sale string) error{
		"join": func(sale string) error {
			return line.ScriptError(line.JoinScript.Run(ctx, r.Client,
				[]string{keys.Pre(sale), keys.Post(sale), keys.Places(sale), keys.Line(sale)}, past.UnixMilli(), "a").Err())
		},
		"raise": func(sale string) error {
			return line.ScriptError(line.RaiseScript.Run(ctx, r.Client, []string{keys.Line(sale), keys.Cursor(sale)}, "", "20", "", "").Err())
		},
		"seal": func(sale string) error {
			return line.ScriptError(line.SealScript.Run(ctx, r.Client, []string{keys.Line(sale), keys.Pre(sale)}, 3).Err())
		},
		"settings": func(sale string) error {
			return line.ScriptError(line.SettingsScript.Run(ctx, r.Client,
				[]string{keys.Cursor(sale), keys.Line(sale), keys.Pre(sale), keys.Post(sale)}, "5", "1", 9, 0, 0, 0, 0, 0).Err())
		},
		"advance": func(sale string) error {
			c := admission.NewCursor(r.Client, keys, nil)
			if err := c.Tick(ctx, []line.Tick{{Sale: sale, StartsAt: past, Available: 10}}); err != nil {
				return err
			}
			if st, _ := c.State(sale); st.Lost {
				return line.ErrLost
			}
			return nil
		},
	}
	all := []string{"join", "raise", "seal", "settings", "advance"}
	cases := []struct {
		name    string
		restore bool // restore the line before losing it
		lose    func(sale string)
		scripts []string // the scripts that check this loss
	}{
		{"never restored", false, func(string) {}, all},
		{"line hash gone", true, func(sale string) { r.Client.Del(ctx, keys.Line(sale)) }, all},
		{"cursor gone", true, func(sale string) { r.Client.Del(ctx, keys.Cursor(sale)) }, []string{"settings", "advance"}},
		{"pre counter gone", true, func(sale string) { r.Client.Del(ctx, keys.Pre(sale)) }, []string{"join", "settings", "advance"}},
		{"post counter gone", true, func(sale string) { r.Client.Del(ctx, keys.Post(sale)) }, []string{"join", "settings", "advance"}},
		{"another history", true, func(sale string) {
			r.Client.HSet(ctx, keys.Line(sale), line.LineReplID, strings.Repeat("0", 40))
		}, []string{"join", "settings", "advance"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sale := "s" + string(rune('a'+i))
			if tc.restore {
				restoreAt(t, r, sale, line.Durable{RatePerSecond: 1, PreCeiling: 10, PostCeiling: 10, ServingCeiling: 10})
			}
			tc.lose(sale)
			keysOfLine := []string{keys.Pre(sale), keys.Post(sale), keys.Places(sale), keys.Seed(sale), keys.Cursor(sale), keys.Line(sale)}
			dump := func() []string {
				t.Helper()
				out := make([]string, len(keysOfLine))
				for k, key := range keysOfLine {
					out[k], _ = r.Client.Dump(ctx, key).Result() // "" when the key does not exist
				}
				return out
			}
			before := dump()
			for _, name := range tc.scripts {
				if err := scripts[name](sale); !errors.Is(err, line.ErrLost) {
					t.Errorf("%s (%s) = %v, want the lost reply (ErrLost)", name, tc.name, err)
				}
				for k, got := range dump() {
					if got != before[k] {
						t.Errorf("%s (%s) changed %s", name, tc.name, keysOfLine[k])
					}
				}
			}
			restoreAt(t, r, sale, line.Durable{RatePerSecond: 1, PreCeiling: 10, PostCeiling: 10, ServingCeiling: 10})
			for _, name := range tc.scripts {
				if err := scripts[name](sale); err != nil {
					t.Errorf("%s after the restore = %v, want nil", name, err)
				}
			}
		})
	}
}
