//go:build !race

package cluster_test

// raceSlows: see race_on_test.go.
const raceSlows = false
