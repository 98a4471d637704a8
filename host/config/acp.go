package config

// ACPConfig is the acp: key: how `dsh acp` opens the agent of each editor
// session. Every field is optional.
type ACPConfig struct {
	// Agent is the configured agent each session starts from (provider,
	// model, system prompt, limits, presets); default the first agent.
	Agent string `koanf:"agent"`
	// Presets are mounted in each session's agent after the agent's own;
	// default none beyond the agent's own. The ACP modes tighten or
	// loosen what these presets ask about; they never lift a deny.
	Presets []string `koanf:"presets"`
	// Mode is the ACP mode a new session starts in: read-only,
	// workspace-write (default) or full-access.
	Mode string `koanf:"mode"`
}
