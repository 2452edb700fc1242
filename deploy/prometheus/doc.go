// Package prometheus holds the tests of flashgate's Prometheus rules (flashgate.rules.yml beside it): promtool
// checks the rules and runs their unit tests (flashgate.rules.test.yml), every metric the rules read must be
// one the binaries export, and every alert must carry a severity, its annotations and a runbook section in
// docs/OPERATIONS.md, and have tests that fire it and tests that do not. It has no code of its own.
package prometheus
