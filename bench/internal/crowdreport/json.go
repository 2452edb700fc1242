package crowdreport

import (
	"fmt"
	"io"

	"github.com/flashgate/flashgate/bench/internal/benchreport"
)

// WriteJSON writes runs as indented JSON; it decodes back into a Runs.
func WriteJSON(w io.Writer, runs Runs) error {
	if err := benchreport.WriteJSON(w, runs); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}
