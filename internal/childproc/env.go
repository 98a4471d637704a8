package childproc

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// BaseEnv lists the variables every child inherits from dsh, when set:
// enough to find programs, a home, a user name, a locale, a temporary
// directory and a time zone. Every LC_* variable is inherited too.
var BaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TMPDIR", "TZ"}

// Environ builds a child's environment from the host's (host; nil means
// os.Environ()): the base variables, then the passthrough names that are
// set, then env, which wins over both. The result is sorted by name, so the
// same config gives the same environment.
func Environ(host []string, passthrough []string, env map[string]string) []string {
	if host == nil {
		host = os.Environ()
	}
	out := map[string]string{}
	for _, kv := range host {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if slices.Contains(BaseEnv, name) || strings.HasPrefix(name, "LC_") || slices.Contains(passthrough, name) {
			out[name] = value
		}
	}
	maps.Copy(out, env)
	list := make([]string, 0, len(out))
	for _, name := range slices.Sorted(maps.Keys(out)) {
		list = append(list, name+"="+out[name])
	}
	return list
}
