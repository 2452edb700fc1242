// Package envflag binds a command's flags to environment variables: a flag
// takes its variable's value when that is set (and not empty), and the
// command line wins over both. A variable whose value does not parse is an
// error that names it, never a silent fall back to the default; booleans
// take 1, 0, true or false and nothing else.
//
// Secrets (Secret) also come from files: $NAME_FILE names a file holding
// the value, so a secret need sit neither in argv nor in the environment.
// No secret is ever printed: -h and a mistyped flag print only the defaults
// the program gave (the command line is parsed before any variable is
// read), and errors about a secret never quote it.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Set is a flag.FlagSet whose flags each have an environment variable.
type Set struct {
	fs       *flag.FlagSet
	bindings []binding
	// sources maps a flag's name to the variable that set it, after Parse.
	sources map[string]string
}

type binding struct {
	flag string
	// envs are the flag's variables, most preferred first: the first one
	// set is used. Only secrets have more than one.
	envs   []string
	kind   string // what a value must be, for the error message
	secret bool   // also read <env>_FILE; never quote the value
}

// New binds flags defined through the returned Set to variables read with
// getenv when Parse runs.
func New(fs *flag.FlagSet) *Set { return &Set{fs: fs} }

func (s *Set) bind(b binding, usage string) string {
	s.bindings = append(s.bindings, b)
	vars := make([]string, len(b.envs))
	for i, env := range b.envs {
		vars[i] = "$" + env
		if b.secret {
			vars[i] += " or $" + env + "_FILE"
		}
	}
	return usage + " (" + strings.Join(vars, "; else ") + ")"
}

// String defines a string flag with its variable; *p holds the default.
func (s *Set) String(p *string, name, env, usage string) {
	s.fs.StringVar(p, name, *p, s.bind(binding{flag: name, envs: []string{env}}, usage))
}

// Secret defines a string flag that holds a secret. It is set from env, or
// from the file $<env>_FILE names (trailing line breaks dropped), setting
// both being an error; when neither is set, from each of fallbacks the same
// way, in order. *p holds the default, which -h prints: it must be no
// secret.
func (s *Set) Secret(p *string, name, env, usage string, fallbacks ...string) {
	b := binding{flag: name, envs: append([]string{env}, fallbacks...), secret: true}
	s.fs.StringVar(p, name, *p, s.bind(b, usage))
}

// Duration defines a duration flag ("250ms", "3s", "1m") with its variable.
func (s *Set) Duration(p *time.Duration, name, env, usage string) {
	s.fs.DurationVar(p, name, *p, s.bind(binding{flag: name, envs: []string{env}, kind: "a duration such as 250ms, 3s or 1m"}, usage))
}

// Int defines an integer flag with its variable.
func (s *Set) Int(p *int, name, env, usage string) {
	s.fs.IntVar(p, name, *p, s.bind(binding{flag: name, envs: []string{env}, kind: "a whole number"}, usage))
}

// Int64 defines a 64-bit integer flag with its variable.
func (s *Set) Int64(p *int64, name, env, usage string) {
	s.fs.Int64Var(p, name, *p, s.bind(binding{flag: name, envs: []string{env}, kind: "a whole number"}, usage))
}

// Float64 defines a number flag with its variable.
func (s *Set) Float64(p *float64, name, env, usage string) {
	s.fs.Float64Var(p, name, *p, s.bind(binding{flag: name, envs: []string{env}, kind: "a number"}, usage))
}

// Bool defines a boolean flag with its variable; both take 1, 0, true or
// false, and "-name" alone means true.
func (s *Set) Bool(p *bool, name, env, usage string) {
	s.fs.Var((*boolValue)(p), name, s.bind(binding{flag: name, envs: []string{env}, kind: "1, 0, true or false"}, usage))
}

// Parse parses args, then sets each flag from its variable, then parses
// args again so that the command line wins. The first pass means -h
// (flag.ErrHelp) and a mistyped flag stop before any variable or secret
// file is read; a variable that does not parse is refused even when its
// flag is given.
func (s *Set) Parse(args []string, getenv func(string) string) error {
	if err := s.fs.Parse(args); err != nil {
		return err
	}
	onCommandLine := make(map[string]bool)
	s.fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	s.sources = make(map[string]string)
	for _, b := range s.bindings {
		v, env, err := b.lookup(getenv)
		if err != nil {
			return err
		}
		if env == "" {
			continue
		}
		if err := s.fs.Set(b.flag, v); err != nil {
			if b.secret {
				return fmt.Errorf("config: $%s is not valid for -%s", env, b.flag)
			}
			return fmt.Errorf("config: $%s=%q is not %s", env, v, b.kind)
		}
		if !onCommandLine[b.flag] {
			s.sources[b.flag] = env
		}
	}
	return s.fs.Parse(args)
}

// Source returns the variable that set the flag name in the last Parse:
// one of the flag's variables (the name without _FILE when the value came
// from a file), or "" when the value is the command line's or the default.
func (s *Set) Source(name string) string { return s.sources[name] }

// lookup returns the value of b's first variable that is set, and which;
// env is "" when none is.
func (b binding) lookup(getenv func(string) string) (v, env string, err error) {
	for _, env := range b.envs {
		v := getenv(env)
		if !b.secret {
			if v != "" {
				return v, env, nil
			}
			continue
		}
		file := getenv(env + "_FILE")
		switch {
		case v != "" && file != "":
			return "", "", fmt.Errorf("config: set $%s or $%s_FILE, not both", env, env)
		case file != "":
			v, err := readSecret(file)
			if err != nil {
				return "", "", fmt.Errorf("config: $%s_FILE: %w", env, err)
			}
			return v, env, nil
		case v != "":
			return v, env, nil
		}
	}
	return "", "", nil
}

// maxSecretBytes bounds a secret file, so that a path such as /dev/zero
// fails rather than filling memory.
const maxSecretBytes = 64 << 10

// readSecret reads the secret in the file at path, dropping trailing line
// breaks (editors and `echo` add one). Errors name the path, never the
// content.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read %s: %w", path, err)
	case len(b) > maxSecretBytes:
		return "", fmt.Errorf("%s is larger than %d bytes: not a secret", path, maxSecretBytes)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
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
