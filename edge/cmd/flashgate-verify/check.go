package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/edge/internal/line"
)

// shownViolations is how many violations a verdict lists.
const shownViolations = 5

// Expect is what the reader brings to a check, recorded from the sale's
// snapshot and from a shopper's own page; what is left zero is not
// checked.
type Expect struct {
	// SeedSHA256 is the draw.seed_sha256 the snapshot published before
	// the start, in lower-case hex.
	SeedSHA256 string
	// PreQueue is the draw.pre_queue the snapshot published once the draw
	// was sealed after the start: the draw's size n. Checked only when
	// HasPreQueue (0 is a size).
	PreQueue    int64
	HasPreQueue bool
	// StartsAt is the sale's starts_at as the snapshot published it.
	StartsAt time.Time
	// Account is a shopper's account id: its entry must be in the log.
	Account string
	// PreIndex is that shopper's pre-queue index (the pos their queue
	// token carries) and Place the place their page showed (0: not
	// given); the entry must have them.
	PreIndex, Place int64
}

// Verdict is what Check found.
type Verdict struct {
	SaleID     string
	SeedSHA256 string    // of the revealed seed
	Committed  bool      // checked against the commitment the reader recorded
	PreQueue   int64     // the draw's size n the entries were checked against
	SizePinned bool      // n is the size the reader recorded, not the log's
	StartsAt   time.Time // of the sale
	Pre        int       // pre-queue places
	Later      int       // places of later joins
	Reached    int       // places the admission cursor reached
	LastAt     time.Time // when it reached the last of them
	Capped     bool      // the log says the times stop at a cap
	Through    int64     // the last place the log says the cursor reached
	Account    *Account  // the account the reader asked about; nil: none
	Violations []string  // the first shownViolations
	Total      int       // violations in all
}

// Account is what the log holds of the account the reader asked about.
type Account struct {
	Name   string
	Hash   [32]byte // SHA-256(salt ‖ Name)
	Entry  *Entry   // nil: none
	Claims string   // what the reader gave of it: "pre-queue index", "place", both, or "" (nothing)
}

// OK reports whether the log passed every check.
func (v *Verdict) OK() bool { return v.Total == 0 }

func (v *Verdict) violate(format string, args ...any) {
	v.Total++
	if len(v.Violations) < shownViolations {
		v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
	}
}

// Check verifies a log against what the reader expects: the revealed seed
// hashes to the commitment (the one the reader recorded before the start,
// when given, and the log's own); the draw's size and the start are the
// ones the reader recorded, when given; every pre-queue entry sits at the
// place the draw (of that seed and size) gives its index, within 1..n,
// and every later join above n; no place and no account appears twice;
// the admission cursor reached the places in order: reached_at never
// decreases as the place rises, no place was reached while a lower one
// never was, and none before the start or after the end; and the account
// the reader names has an entry, with the pre-queue index and place the
// reader gives. It sorts l.Entries by place.
//
// The log shows when the cursor reached each place, which is when its
// shopper could be admitted, not that they were: it cannot show a
// shopper kept waiting at their turn.
func Check(l *Log, exp Expect) Verdict {
	v := Verdict{SaleID: l.SaleID, StartsAt: l.StartsAt, PreQueue: l.Draw.PreQueue,
		Capped: l.Admission.StepsCapped, Through: l.Admission.ReachedThrough}
	if exp.HasPreQueue {
		v.PreQueue, v.SizePinned = exp.PreQueue, true
		if l.Draw.PreQueue != exp.PreQueue {
			v.violate("the log's draw has pre_queue %s, not the %s the sale published after the draw", num(l.Draw.PreQueue), num(exp.PreQueue))
		}
	}
	if !exp.StartsAt.IsZero() {
		if !l.StartsAt.Equal(exp.StartsAt) {
			v.violate("the log's starts_at is %s, not the %s the sale published", stamp(l.StartsAt), stamp(exp.StartsAt))
		}
		v.StartsAt = exp.StartsAt
	}
	draw, drawn := checkDraw(&v, l, exp.SeedSHA256)
	slices.SortStableFunc(l.Entries, func(a, b Entry) int { return cmp.Compare(a.Place, b.Place) })
	holder := make(map[[32]byte]int64, len(l.Entries)) // account -> its first place
	n := v.PreQueue
	var lowestWaiting int64 // the lowest place never reached; 0: none yet
	var last Entry          // the reached entry at the highest place so far
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
		if e.ReachedAt.IsZero() {
			if lowestWaiting == 0 {
				lowestWaiting = e.Place
			}
			continue
		}
		v.Reached++
		switch {
		case lowestWaiting != 0:
			v.violate("place %s was reached (%s) while place %s, ahead of it, never was", num(e.Place), stamp(e.ReachedAt), num(lowestWaiting))
		case last.Place != 0 && e.ReachedAt.Before(last.ReachedAt):
			v.violate("place %s was reached (%s) before place %s, ahead of it (%s)", num(e.Place), stamp(e.ReachedAt), num(last.Place), stamp(last.ReachedAt))
		}
		if e.ReachedAt.Before(v.StartsAt) {
			v.violate("place %s was reached (%s) before the sale started (%s)", num(e.Place), stamp(e.ReachedAt), stamp(v.StartsAt))
		}
		if !l.EndsAt.IsZero() && !e.ReachedAt.Before(l.EndsAt) {
			v.violate("place %s was reached (%s) after the sale ended (%s)", num(e.Place), stamp(e.ReachedAt), stamp(l.EndsAt))
		}
		if e.ReachedAt.After(v.LastAt) {
			v.LastAt = e.ReachedAt
		}
		last = e
	}
	if exp.Account != "" {
		checkAccount(&v, l, exp)
	}
	return v
}

// checkDraw checks the seed against the commitments and returns the
// draw it reveals, of size v.PreQueue (false when there is none to
// recompute).
func checkDraw(v *Verdict, l *Log, commitment string) (line.Shuffle, bool) {
	if l.Draw.Algorithm != line.ShuffleAlgorithm {
		v.violate("the draw's algorithm is %q; this tool recomputes %s only", l.Draw.Algorithm, line.ShuffleAlgorithm)
		return line.Shuffle{}, false
	}
	seed, err := hex.DecodeString(l.Draw.Seed)
	if err != nil || len(seed) == 0 {
		v.violate("the log reveals no seed (draw.seed %q is not hex)", l.Draw.Seed)
		return line.Shuffle{}, false
	}
	v.SeedSHA256 = line.SeedHash(seed)
	if !strings.EqualFold(v.SeedSHA256, l.Draw.SeedSHA256) {
		v.violate("the revealed seed hashes to %s, not to the log's own seed_sha256 %s", v.SeedSHA256, l.Draw.SeedSHA256)
	}
	if commitment != "" {
		v.Committed = true
		if !strings.EqualFold(v.SeedSHA256, commitment) {
			v.violate("the revealed seed hashes to %s, not to the commitment %s published before the start", v.SeedSHA256, commitment)
		}
	}
	if v.PreQueue < 0 {
		v.violate("the draw's pre_queue is %d", v.PreQueue)
		return line.Shuffle{}, false
	}
	return line.NewShuffle(seed, v.PreQueue), true
}

// checkDrawn checks a pre-queue entry's place against the draw.
func checkDrawn(v *Verdict, e Entry, draw line.Shuffle, drawn bool, n int64) {
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

// checkAccount finds the entry of exp.Account, whose hash the log's salt
// gives, and checks it against the pre-queue index and place the reader
// gave: an account without an entry, or with another index or place, is
// one an operator may have given to someone else.
func checkAccount(v *Verdict, l *Log, exp Expect) {
	salt, err := hex.DecodeString(l.Salt)
	if err != nil || len(salt) == 0 {
		v.violate("the log's salt %q is not hex: account %s cannot be looked up", l.Salt, exp.Account)
		return
	}
	a := &Account{Name: exp.Account, Hash: sha256.Sum256(append(salt, exp.Account...))}
	v.Account = a
	switch {
	case exp.PreIndex > 0 && exp.Place > 0:
		a.Claims = "pre-queue index and the place"
	case exp.PreIndex > 0:
		a.Claims = "pre-queue index"
	case exp.Place > 0:
		a.Claims = "place"
	}
	for i := range l.Entries {
		if l.Entries[i].Account == a.Hash {
			a.Entry = &l.Entries[i]
			break
		}
	}
	e := a.Entry
	if e == nil {
		var whose string
		switch {
		case exp.PreIndex > 0:
			whose = heldBy(l, "pre-queue index "+num(exp.PreIndex), func(e Entry) bool { return e.Pre && e.PreIndex == exp.PreIndex })
		case exp.Place > 0:
			whose = heldBy(l, "place "+num(exp.Place), func(e Entry) bool { return e.Place == exp.Place })
		}
		v.violate("account %s (account_sha256 %x): this account has no place in the log%s", a.Name, a.Hash, whose)
		return
	}
	if exp.PreIndex > 0 {
		switch {
		case !e.Pre:
			v.violate("account %s holds place %s as a join after the start, not pre-queue index %s as you gave%s", a.Name, num(e.Place), num(exp.PreIndex),
				heldBy(l, "pre-queue index "+num(exp.PreIndex), func(o Entry) bool { return o.Pre && o.PreIndex == exp.PreIndex }))
		case e.PreIndex != exp.PreIndex:
			v.violate("account %s holds pre-queue index %s, not %s as you gave%s", a.Name, num(e.PreIndex), num(exp.PreIndex),
				heldBy(l, "pre-queue index "+num(exp.PreIndex), func(o Entry) bool { return o.Pre && o.PreIndex == exp.PreIndex }))
		}
	}
	if exp.Place > 0 && e.Place != exp.Place {
		v.violate("account %s is at place %s in the log, not %s as you gave%s", a.Name, num(e.Place), num(exp.Place),
			heldBy(l, "place "+num(exp.Place), func(o Entry) bool { return o.Place == exp.Place }))
	}
}

// heldBy says who the log gives what to: the first entry match takes.
func heldBy(l *Log, what string, match func(Entry) bool) string {
	for _, e := range l.Entries {
		if match(e) {
			return fmt.Sprintf("; the log gives %s to account_sha256 %s", what, short(e.Account[:]))
		}
	}
	return "; the log gives " + what + " to nobody"
}

// Print writes the verdict in plain English, then the entry of the
// account the reader asked about.
func (v *Verdict) Print(w io.Writer) {
	if !v.OK() {
		fmt.Fprintf(w, "FAILED: the admission log of sale %s has %s %s:\n", v.SaleID, num(int64(v.Total)), plural(v.Total, "problem", "problems"))
		for _, s := range v.Violations {
			fmt.Fprintf(w, "  - %s\n", s)
		}
		if more := v.Total - len(v.Violations); more > 0 {
			fmt.Fprintf(w, "  (and %s more)\n", num(int64(more)))
		}
	} else {
		v.printVerified(w)
	}
	if a := v.Account; a != nil && a.Entry != nil {
		a.print(w, v.PreQueue)
		switch {
		case !v.OK():
		case a.Claims != "":
			fmt.Fprintf(w, "It holds the %s you gave.\n", a.Claims)
		default:
			fmt.Fprintln(w, "Note: to check that this entry is the one you were given, pass -place with the place your page showed",
				"(or -pre-index with the pos your queue token carries).")
		}
	}
}

func (v *Verdict) printVerified(w io.Writer) {
	how := "as committed (seed SHA-256 " + v.SeedSHA256 + ", the commitment you recorded"
	if !v.Committed {
		how = "by the revealed seed, which matches the log's own commitment (seed SHA-256 " + v.SeedSHA256
	}
	if v.SizePinned {
		how += "; n = " + num(v.PreQueue) + ", the size you recorded"
	}
	fmt.Fprintf(w, "VERIFIED: %s pre-queue %s drawn %s) for the start at %s; %s later %s behind them; the admission cursor reached %s of %s in place order",
		num(int64(v.Pre)), plural(v.Pre, "place", "places"), how, v.StartsAt.UTC().Format("2006-01-02 15:04:05 MST"),
		num(int64(v.Later)), plural(v.Later, "place", "places"), num(int64(v.Reached)), num(int64(v.Pre+v.Later)))
	if v.Reached > 0 {
		fmt.Fprintf(w, ", the last at %s", stamp(v.LastAt))
	}
	fmt.Fprintln(w, ".")
	if !v.Committed {
		fmt.Fprintln(w, "Note: the seed was compared only with the log's own claim. Pass -seed-sha256 with the draw.seed_sha256",
			"the sale published before its start to check that the draw was fixed in advance.")
	}
	if !v.SizePinned {
		fmt.Fprintf(w, "Note: the draw's size n = %s was taken from the log. Pass -pre-queue with the draw.pre_queue the sale published after its start to check it.\n", num(v.PreQueue))
	}
	if v.Capped {
		fmt.Fprintf(w, "Note: the edge recorded the cursor's moves up to its cap; places after %s may have been reached at times this log cannot show.\n", num(v.Through))
	}
}

// print writes the account's entry; n is the draw's size.
func (a *Account) print(w io.Writer, n int64) {
	e := a.Entry
	fmt.Fprintf(w, "Account %s (account_sha256 %x): ", a.Name, a.Hash)
	if e.Pre {
		fmt.Fprintf(w, "pre-queue join #%s, drawn to place %s of %s", num(e.PreIndex), num(e.Place), num(n))
	} else {
		fmt.Fprintf(w, "joined after the start, place %s", num(e.Place))
	}
	if e.ReachedAt.IsZero() {
		fmt.Fprintln(w, "; the cursor never reached it.")
	} else {
		fmt.Fprintf(w, "; the cursor reached it at %s.\n", stamp(e.ReachedAt))
	}
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
