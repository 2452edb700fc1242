package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/edge/internal/queue"
)

// shownViolations is how many violations a verdict lists.
const shownViolations = 5

// Verdict is what Check found.
type Verdict struct {
	SaleID     string
	SeedSHA256 string    // of the revealed seed
	Committed  bool      // checked against the commitment the reader recorded
	StartsAt   time.Time // of the sale
	Pre        int       // pre-queue places
	Later      int       // places of later joins
	Admitted   int       // places admitted
	LastAt     time.Time // the last admission
	Capped     bool      // the log says admission times stop at a cap
	Through    int64     // the last place the log says the cursor reached

	Violations []string // the first shownViolations
	Total      int      // violations in all
}

// OK reports whether the log passed every check.
func (v *Verdict) OK() bool { return v.Total == 0 }

func (v *Verdict) violate(format string, args ...any) {
	v.Total++
	if len(v.Violations) < shownViolations {
		v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
	}
}

// Check verifies a log: the revealed seed hashes to the commitment (the
// one the reader recorded before the start, when given, and the log's
// own); every pre-queue entry sits at the place the published draw gives
// its index, within 1..n, and every later join above n; no place and no
// account appears twice; and admission followed the places: admitted_at
// never decreases as the place rises, no place was admitted while a lower
// one never was, and none before the start or after the end. It sorts
// l.Entries by place.
func Check(l *Log, commitment string) Verdict {
	v := Verdict{SaleID: l.SaleID, StartsAt: l.StartsAt, Capped: l.Admission.StepsCapped, Through: l.Admission.AdmittedThrough}
	draw, drawn := checkDraw(&v, l, commitment)
	slices.SortStableFunc(l.Entries, func(a, b Entry) int { return cmp.Compare(a.Place, b.Place) })
	holder := make(map[[32]byte]int64, len(l.Entries)) // account -> its first place
	n := l.Draw.PreQueue
	var lowestWaiting int64 // the lowest place never admitted; 0: none yet
	var last Entry          // the admitted entry at the highest place so far
	for i, e := range l.Entries {
		if e.Pre {
			v.Pre++
			checkDrawn(&v, e, draw, drawn, n)
		} else {
			v.Later++
			if e.Place <= n {
				v.violate("place %s: a join after the start inside the pre-queue's places 1..%s", num(e.Place), num(n))
			}
		}
		if i > 0 && l.Entries[i-1].Place == e.Place {
			v.violate("place %s is given to two accounts", num(e.Place))
		}
		if first, ok := holder[e.Account]; ok {
			v.violate("account %s holds two places, %s and %s", short(e.Account[:]), num(first), num(e.Place))
		} else {
			holder[e.Account] = e.Place
		}
		if e.AdmittedAt.IsZero() {
			if lowestWaiting == 0 {
				lowestWaiting = e.Place
			}
			continue
		}
		v.Admitted++
		switch {
		case lowestWaiting != 0:
			v.violate("place %s was admitted (%s) while place %s, ahead of it, never was", num(e.Place), stamp(e.AdmittedAt), num(lowestWaiting))
		case last.Place != 0 && e.AdmittedAt.Before(last.AdmittedAt):
			v.violate("place %s was admitted (%s) before place %s, ahead of it (%s)", num(e.Place), stamp(e.AdmittedAt), num(last.Place), stamp(last.AdmittedAt))
		}
		if e.AdmittedAt.Before(l.StartsAt) {
			v.violate("place %s was admitted (%s) before the sale started (%s)", num(e.Place), stamp(e.AdmittedAt), stamp(l.StartsAt))
		}
		if !l.EndsAt.IsZero() && !e.AdmittedAt.Before(l.EndsAt) {
			v.violate("place %s was admitted (%s) after the sale ended (%s)", num(e.Place), stamp(e.AdmittedAt), stamp(l.EndsAt))
		}
		if e.AdmittedAt.After(v.LastAt) {
			v.LastAt = e.AdmittedAt
		}
		last = e
	}
	return v
}

// checkDraw checks the seed against the commitments and returns the
// draw it reveals (false when there is none to recompute).
func checkDraw(v *Verdict, l *Log, commitment string) (queue.Shuffle, bool) {
	if l.Draw.Algorithm != queue.ShuffleAlgorithm {
		v.violate("the draw's algorithm is %q; this tool recomputes %s only", l.Draw.Algorithm, queue.ShuffleAlgorithm)
		return queue.Shuffle{}, false
	}
	seed, err := hex.DecodeString(l.Draw.Seed)
	if err != nil || len(seed) == 0 {
		v.violate("the log reveals no seed (draw.seed %q is not hex)", l.Draw.Seed)
		return queue.Shuffle{}, false
	}
	v.SeedSHA256 = queue.SeedHash(seed)
	if !strings.EqualFold(v.SeedSHA256, l.Draw.SeedSHA256) {
		v.violate("the revealed seed hashes to %s, not to the log's own seed_sha256 %s", v.SeedSHA256, l.Draw.SeedSHA256)
	}
	if commitment != "" {
		v.Committed = true
		if !strings.EqualFold(v.SeedSHA256, commitment) {
			v.violate("the revealed seed hashes to %s, not to the commitment %s published before the start", v.SeedSHA256, commitment)
		}
	}
	if l.Draw.PreQueue < 0 {
		v.violate("the draw's pre_queue is %d", l.Draw.PreQueue)
		return queue.Shuffle{}, false
	}
	return queue.NewShuffle(seed, l.Draw.PreQueue), true
}

// checkDrawn checks a pre-queue entry's place against the draw.
func checkDrawn(v *Verdict, e Entry, draw queue.Shuffle, drawn bool, n int64) {
	if e.PreIndex < 1 || e.PreIndex > n {
		v.violate("place %s: pre_index %s is outside the draw's 1..%s", num(e.Place), num(e.PreIndex), num(n))
		return
	}
	if e.Place < 1 || e.Place > n {
		v.violate("place %s: a pre-queue join outside the pre-queue's places 1..%s", num(e.Place), num(n))
	}
	if !drawn {
		return
	}
	if want, err := draw.Position(e.PreIndex); err == nil && want != e.Place {
		v.violate("place %s: pre_index %s is drawn to place %s, not %s", num(e.Place), num(e.PreIndex), num(want), num(e.Place))
	}
}

// Print writes the verdict in plain English.
func (v *Verdict) Print(w io.Writer) {
	if !v.OK() {
		fmt.Fprintf(w, "FAILED: the admission log of sale %s has %s %s:\n", v.SaleID, num(int64(v.Total)), plural(v.Total, "problem", "problems"))
		for _, s := range v.Violations {
			fmt.Fprintf(w, "  - %s\n", s)
		}
		if more := v.Total - len(v.Violations); more > 0 {
			fmt.Fprintf(w, "  (and %s more)\n", num(int64(more)))
		}
		return
	}
	how := "as committed (seed SHA-256 " + v.SeedSHA256 + ", the commitment you recorded)"
	if !v.Committed {
		how = "by the revealed seed, which matches the log's own commitment (seed SHA-256 " + v.SeedSHA256 + ")"
	}
	fmt.Fprintf(w, "VERIFIED: %s pre-queue %s drawn %s for the start at %s; %s later %s behind them; %s of %s admitted in place order",
		num(int64(v.Pre)), plural(v.Pre, "place", "places"), how, v.StartsAt.UTC().Format("2006-01-02 15:04:05 MST"),
		num(int64(v.Later)), plural(v.Later, "place", "places"), num(int64(v.Admitted)), num(int64(v.Pre+v.Later)))
	if v.Admitted > 0 {
		fmt.Fprintf(w, ", the last at %s", stamp(v.LastAt))
	}
	fmt.Fprintln(w, ".")
	if !v.Committed {
		fmt.Fprintln(w, "Note: the seed was compared only with the log's own claim. Pass -seed-sha256 with the draw.seed_sha256",
			"the sale published before its start to check that the draw was fixed in advance.")
	}
	if v.Capped {
		fmt.Fprintf(w, "Note: the edge recorded admission times up to its cap; places after %s may have been admitted at times this log cannot show.\n", num(v.Through))
	}
}

// PrintAccount writes the entry of account, whose hash the log's salt
// gives.
func PrintAccount(w io.Writer, l *Log, account string) error {
	salt, err := hex.DecodeString(l.Salt)
	if err != nil || len(salt) == 0 {
		return fmt.Errorf("the log's salt %q is not hex: accounts cannot be looked up", l.Salt)
	}
	sum := sha256.Sum256(append(salt, account...))
	fmt.Fprintf(w, "Account %s (account_sha256 %x): ", account, sum)
	for _, e := range l.Entries {
		if !bytes.Equal(e.Account[:], sum[:]) {
			continue
		}
		if e.Pre {
			fmt.Fprintf(w, "pre-queue join #%s, drawn to place %s of %s", num(e.PreIndex), num(e.Place), num(l.Draw.PreQueue))
		} else {
			fmt.Fprintf(w, "joined after the start, place %s", num(e.Place))
		}
		if e.AdmittedAt.IsZero() {
			fmt.Fprintln(w, "; never admitted.")
		} else {
			fmt.Fprintf(w, "; admitted at %s.\n", stamp(e.AdmittedAt))
		}
		return nil
	}
	fmt.Fprintln(w, "no place in this log.")
	return nil
}

// num writes n with thousands separators: 20,000.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// stamp writes an instant as the log does: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// short abbreviates a hash for a message.
func short(b []byte) string { return hex.EncodeToString(b[:6]) + "…" }
