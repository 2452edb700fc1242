// Package envflag binds a command's flags to environment variables: a flag
// starts from its variable when that is set (and not empty), and the
// command line wins over both. A variable whose value does not parse is an
// error that names it, never a silent fall back to the default; booleans
// take 1, 0, true or false and nothing else.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// Set is a flag.FlagSet whose flags each have an environment variable.
type Set struct {
	fs       *flag.FlagSet
	bindings []binding
}

type binding struct {
	flag, env string
	kind      string // what a value must be, for the error message
}

// New binds flags defined through the returned Set to variables read with
// getenv when Parse runs.
func New(fs *flag.FlagSet) *Set { return &Set{fs: fs} }

func (s *Set) bind(name, env, kind, usage string) string {
	s.bindings = append(s.bindings, binding{flag: name, env: env, kind: kind})
	return usage + " ($" + env + ")"
}

// String defines a string flag with its variable; *p holds the default.
func (s *Set) String(p *string, name, env, usage string) {
	s.fs.StringVar(p, name, *p, s.bind(name, env, "", usage))
}

// Duration defines a duration flag ("250ms", "3s", "1m") with its variable.
func (s *Set) Duration(p *time.Duration, name, env, usage string) {
	s.fs.DurationVar(p, name, *p, s.bind(name, env, "a duration such as 250ms, 3s or 1m", usage))
}

// Int defines an integer flag with its variable.
func (s *Set) Int(p *int, name, env, usage string) {
	s.fs.IntVar(p, name, *p, s.bind(name, env, "a whole number", usage))
}

// Float64 defines a number flag with its variable.
func (s *Set) Float64(p *float64, name, env, usage string) {
	s.fs.Float64Var(p, name, *p, s.bind(name, env, "a number", usage))
}

// Bool defines a boolean flag with its variable; both take 1, 0, true or
// false, and "-name" alone means true.
func (s *Set) Bool(p *bool, name, env, usage string) {
	s.fs.Var((*boolValue)(p), name, s.bind(name, env, "1, 0, true or false", usage))
}

// Parse sets each flag from its variable, then parses args over them.
func (s *Set) Parse(args []string, getenv func(string) string) error {
	for _, b := range s.bindings {
		v := getenv(b.env)
		if v == "" {
			continue
		}
		if err := s.fs.Set(b.flag, v); err != nil {
			return fmt.Errorf("config: $%s=%q is not %s", b.env, v, b.kind)
		}
	}
	return s.fs.Parse(args)
}

// boolValue is a flag.Value that takes 1, 0, true or false only: strconv's
// "t", "F" or "TRUE" are typos more often than intent.
type boolValue bool

var errBool = errors.New("want 1, 0, true or false")

func (b *boolValue) Set(s string) error {
	switch s {
	case "1", "true":
		*b = true
	case "0", "false":
		*b = false
	default:
		return errBool
	}
	return nil
}

func (b *boolValue) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*b))
}

// IsBoolFlag lets "-name" stand for "-name=true".
func (b *boolValue) IsBoolFlag() bool { return true }
