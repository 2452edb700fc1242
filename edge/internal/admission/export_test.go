package admission

import "time"

// SetMaxSteps makes the cursor record at most n moves per sale.
func (c *Cursor) SetMaxSteps(n int64) { c.maxSteps = n }

// NewReached returns the places reached by the moves given, as the steps
// list holds them, made before the moment before; capped says the list was
// full.
func NewReached(steps []string, before time.Time, capped bool) (Reached, error) {
	var a Reached
	for _, s := range steps {
		if err := a.add(s, before.UnixMilli()); err != nil {
			return Reached{}, err
		}
	}
	a.Capped = capped && a.Steps == len(steps)
	return a, nil
}
