//go:build !race

package challenge_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
