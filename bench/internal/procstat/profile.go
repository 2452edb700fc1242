package procstat

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
)

// StartCPUProfile starts a CPU profile of the part of a run called name into the file
// base.name.pprof (spaces and slashes in name become dashes); an empty base
// profiles nothing. The stop function it returns is never nil, may be called
// more than once, and reports the error of closing the file.
func StartCPUProfile(base, name string) (stop func() error, err error) {
	if base == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(base + "." + strings.NewReplacer(" ", "-", "/", "-").Replace(name) + ".pprof")
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	var cerr error
	return func() error {
		once.Do(func() {
			pprof.StopCPUProfile()
			cerr = f.Close()
		})
		return cerr
	}, nil
}
