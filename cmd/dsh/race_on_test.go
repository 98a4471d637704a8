//go:build race

package main

// buildFlags build the dsh under test with the race detector when the
// tests run with it, so the processes they drive are checked too.
var buildFlags = []string{"-race"}
