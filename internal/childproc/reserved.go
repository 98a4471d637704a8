package childproc

import "slices"

// Names of the variables dsh itself sets in a child's environment. They
// are listed here, once, because a dsh started inside one of its own
// children (an agent working on a repository that runs dsh) inherits them,
// and its config loader must not read them as DSH_ overrides.
const (
	// MagicCookieEnv carries go-plugin's handshake cookie to a plugin binary.
	MagicCookieEnv = "DSH_PLUGIN_MAGIC_COOKIE"
	// ProjectDirEnv, HookEventEnv and AgentIDEnv tell a hook command where
	// and why it runs.
	ProjectDirEnv = "DSH_PROJECT_DIR"
	HookEventEnv  = "DSH_HOOK_EVENT"
	AgentIDEnv    = "DSH_AGENT_ID"
)

// ReservedEnv lists every variable dsh sets in a child's environment.
var ReservedEnv = []string{HostFDEnv, MagicCookieEnv, ProjectDirEnv, HookEventEnv, AgentIDEnv}

// Reserved reports whether dsh sets name in its children's environment.
func Reserved(name string) bool { return slices.Contains(ReservedEnv, name) }
