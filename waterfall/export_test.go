package waterfall

// UnwindsOnPanic says whether a panic on the dispatching goroutine unwinds
// the listeners outside it (where the dispatch can tell its own goroutine's
// hops from others) or comes back to them as next's error (everywhere
// else).
const UnwindsOnPanic = knowsG

// Curg is curg for the benchmarks' floors: the goroutine identity a hop
// compares, at what it costs the hop.
func Curg() uintptr { return curg() }
