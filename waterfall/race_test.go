//go:build race

package waterfall_test

const raceEnabled = true
