package admission

import "time"

// SetMaxSteps makes the cursor record at most n moves per sale.
func (c *Cursor) SetMaxSteps(n int64) { c.maxSteps = n }

// NewAdmissions returns the admissions of the moves given, as the steps
// list holds them, made before the moment before; capped says the list was
// full.
func NewAdmissions(steps []string, before time.Time, capped bool) (Admissions, error) {
	var a Admissions
	for _, s := range steps {
		if err := a.add(s, before.UnixMilli()); err != nil {
			return Admissions{}, err
		}
	}
	a.Capped = capped && a.Steps == len(steps)
	return a, nil
}
