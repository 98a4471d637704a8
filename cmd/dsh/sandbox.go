package main

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/tools/bash"
)

// describeSandbox says, for each agent with a bash tool, which sandbox its
// commands run under on this machine, in the words tools.bash itself logs
// when it starts: Landlock with its ABI and what it confines, refused
// because the kernel cannot enforce it, weaker with a warning, or off.
func describeSandbox(cfg *config.Config) string {
	var b strings.Builder
	for _, a := range cfg.Agents {
		e := bashEntry(cfg, a)
		if e == nil {
			continue
		}
		bc, ok := cfg.PluginConfig(e).(*bash.Config)
		if !ok {
			continue // its config did not decode; config check reported it
		}
		line, err := bash.Describe(*bc)
		if err != nil {
			line = "cannot start: " + err.Error()
		}
		fmt.Fprintf(&b, "  %s: %s\n", a.ID, line)
	}
	if b.Len() == 0 {
		return "bash sandbox: no agent has the bash tool\n"
	}
	return "bash sandbox:\n" + b.String()
}

// bashEntry returns the tools.bash entry an agent's bash comes from: its
// own presets' (the last one mounted) over the root's.
func bashEntry(cfg *config.Config, a config.AgentConfig) *config.Entry {
	var found *config.Entry
	pick := func(list []config.Entry) {
		for i := range list {
			if list[i].Use == "tools.bash" && !list[i].Disabled {
				found = &list[i]
			}
		}
	}
	pick(cfg.Plugins)
	for _, name := range a.PresetNames() {
		pick(cfg.Presets[name])
	}
	return found
}
