//go:build race

package cluster_test

// raceSlows: the race detector makes a resume several times slower, so
// the scale tests store fewer sessions under it; the figures in
// docs/cluster.md are measured without it.
const raceSlows = true
