package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/dsh-go/dsh/sdk"
)

// versionText says which dsh this is: the module version `go install`
// recorded (or "(devel)" for a local build), the commit it was built from
// when known, the Go toolchain, and the plugin protocol it speaks — what a
// plugin author or a bug report needs.
func versionText() string {
	version, commit := "(devel)", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit != "" && modified {
			commit += "+dirty"
		}
	}
	out := "dsh " + version
	if commit != "" {
		out += " (" + commit + ")"
	}
	return fmt.Sprintf("%s, %s %s/%s, plugin protocol %d\n", out, runtime.Version(), runtime.GOOS, runtime.GOARCH, sdk.ProtocolVersion)
}
