package config

import (
	"strings"

	"github.com/dsh-go/dsh/internal/childproc"
)

// IgnoreEnvironmentKey is the top-level key that turns DSH_ overrides off
// from the file itself. It is read before any override is applied, so the
// environment cannot turn it back on.
const IgnoreEnvironmentKey = "ignore_environment"

// overrideVariables returns the DSH_ variables of the environment that
// override config keys. Left out: DSH_CONFIG (it picks the file), the
// secrets the config names (read by their users, never as keys), and the
// variables dsh sets in its own children (childproc.ReservedEnv), so a dsh
// started by one of its tools, hooks or plugins loads like any other.
// Nothing is returned when the --ignore-env flag or the file's
// ignore_environment says the environment is not to be trusted.
func overrideVariables(raw map[string]any, opts LoadOptions) []string {
	if opts.IgnoreEnv || raw[IgnoreEnvironmentKey] == true {
		return nil
	}
	secrets := secretVariables(raw)
	var out []string
	for _, kv := range opts.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DSH_") || name == "DSH_CONFIG" || secrets[name] || childproc.Reserved(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
