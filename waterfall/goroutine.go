//go:build amd64 || arm64

package waterfall

// knowsG reports whether curg identifies the running goroutine on this
// architecture; where it does not, every hop takes the guarded path.
const knowsG = true

// curg returns the address of the running goroutine's descriptor (the
// runtime's g), read from where the runtime keeps it. It is only ever
// compared with the value the dispatching goroutine stored, never
// dereferenced: two goroutines alive at once never share one, which is all
// a hop needs to know that it runs nested in its dispatch, under the
// dispatch's recover. Go offers no goroutine identity of its own, and a
// deferred recover in every hop instead cost more than the rest of the
// hop (see BENCHMARKS.md, issue 38).
func curg() uintptr
