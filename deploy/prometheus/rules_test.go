package prometheus

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile = "flashgate.rules.yml"
	testsFile = "flashgate.rules.test.yml"
	// moduleRoot is the repository's root, from this package's folder.
	moduleRoot = "../.."
	// operations is the runbook the alerts' runbook_url points into, from the module root.
	operations = "docs/OPERATIONS.md"
)

// exportDirs are the folders, from the module root, whose Go sources define the metrics the binaries export.
var exportDirs = []string{"edge", "origin", "internal"}

// rule is a rule of flashgate.rules.yml: an alert or a recording rule.
type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// unitTests is what these tests read of flashgate.rules.test.yml: each case's alert checks.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name   string `json:"name"`
		Alerts []struct {
			EvalTime  string          `json:"eval_time"`
			AlertName string          `json:"alertname"`
			ExpAlerts []expectedAlert `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

type expectedAlert struct {
	Labels      map[string]string `json:"exp_labels"`
	Annotations map[string]string `json:"exp_annotations"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesFile, &f)
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return rules
}

// promtool runs promtool with args in this folder and fails t, with promtool's output, when it fails. It fails
// (never skips) when promtool is not installed: make test installs it.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (looked in PATH): make test installs it (deploy/local/test.sh); " +
			"on Debian: sudo apt-get install prometheus")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestPromtool: promtool takes the rules and their unit tests pass.
func TestPromtool(t *testing.T) {
	promtool(t, "check", "rules", rulesFile)
	promtool(t, "test", "rules", testsFile)
}

var (
	// goMetricName is a metric name as the Go sources write it: a string literal.
	goMetricName = regexp.MustCompile(`"(flashgate_[a-z0-9_]+)"`)
	// promString is a quoted string in PromQL (label values), left out before looking for names.
	promString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	// promName is a metric or label name, keyword or function in PromQL.
	promName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// exportedNames are the metric names the binaries export: every "flashgate_..." string literal in the Go
// sources under exportDirs, tests left out.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range exportDirs {
		err := filepath.WalkDir(filepath.Join(moduleRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range goMetricName.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(names) < 20 {
		t.Fatalf("found only %d metric names in the Go sources under %v: is the pattern still right?", len(names), exportDirs)
	}
	return names
}

// exported reports whether name is exported, or is a histogram's or summary's series of an exported name.
func exported(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && names[base] {
			return true
		}
	}
	return false
}

// TestRuleMetricsExported: every flashgate_ metric the rules read is one the binaries export (a typo would
// make an alert that can never fire), and every name with a colon is one a recording rule here makes.
func TestRuleMetricsExported(t *testing.T) {
	rules := readRules(t)
	names := exportedNames(t)
	recorded := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			recorded[r.Record] = true
		}
	}
	used := 0
	for _, r := range rules {
		what := r.Alert + r.Record
		for _, tok := range promName.FindAllString(promString.ReplaceAllString(r.Expr, `""`), -1) {
			switch {
			case strings.Contains(tok, ":"):
				if !recorded[tok] {
					t.Errorf("%s reads %s, which no recording rule in %s makes", what, tok, rulesFile)
				}
			case strings.HasPrefix(tok, "flashgate_"):
				used++
				if !exported(names, tok) {
					t.Errorf("%s reads %s, which no binary exports (no %q literal in the Go sources under %v)", what, tok, tok, exportDirs)
				}
			}
		}
	}
	if used == 0 {
		t.Fatalf("found no flashgate_ metric in %s's expressions", rulesFile)
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading's text.
func headingAnchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// alertAnchors are the anchors of the headings in docs/OPERATIONS.md's "## Alerts" section.
func alertAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, operations))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Alerts"
			if in {
				anchors["alerts"] = true
			}
			continue
		}
		if in && strings.HasPrefix(line, "### ") {
			anchors[headingAnchor(strings.TrimPrefix(line, "### "))] = true
		}
	}
	if !anchors["alerts"] {
		t.Fatalf("%s has no \"## Alerts\" section", operations)
	}
	return anchors
}

// TestAlertsAnnotated: every alert has a severity (page or ticket), a summary, a description and a
// runbook_url pointing at its own heading in the Alerts section of docs/OPERATIONS.md.
func TestAlertsAnnotated(t *testing.T) {
	anchors := alertAnchors(t)
	seen := map[string]bool{}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		want := operations + "#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("alert %s: %s's Alerts section has no \"### %s\" heading", r.Alert, operations, r.Alert)
		}
	}
}

// TestAlertsTested: every alert has a unit test in which it fires and one in which it must not, and the unit
// tests name no alert the rules lack.
func TestAlertsTested(t *testing.T) {
	var u unitTests
	readYAML(t, testsFile, &u)
	if !slices.Equal(u.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s: rule_files %v, want [%s]", testsFile, u.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, c := range u.Tests {
		for _, a := range c.Alerts {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName]++
			} else {
				quiet[a.AlertName]++
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range readRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		if fires[r.Alert] == 0 {
			t.Errorf("alert %s: no unit test in %s expects it to fire", r.Alert, testsFile)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("alert %s: no unit test in %s expects it not to fire", r.Alert, testsFile)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fires)) {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which %s does not define", testsFile, name, rulesFile)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(quiet)) {
		if !alerts[name] && fires[name] == 0 {
			t.Errorf("%s tests alert %s, which %s does not define", testsFile, name, rulesFile)
		}
	}
}
