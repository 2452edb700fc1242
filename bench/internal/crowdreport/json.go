package crowdreport

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes runs as indented JSON; it decodes back into a Runs.
func WriteJSON(w io.Writer, runs Runs) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(runs); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}
