package bash

import "github.com/dsh-go/dsh/internal/sandbox"

// SetProbe stands in a kernel for the plugins applied until restore.
func SetProbe(st sandbox.Status) (restore func()) {
	old := probe
	probe = func() sandbox.Status { return st }
	return func() { probe = old }
}

// NestedRepos is nestedRepos, for its bounds to be tested.
var NestedRepos = nestedRepos
