package hooks_test

import (
	"fmt"

	"github.com/dsh-go/dsh/plugins/hooks"
)

// ExampleConfig_Validate shows the inline form of the config and what a
// typo in an event name reads like at config check.
func ExampleConfig_Validate() {
	cfg := hooks.Config{}.Defaults()
	cfg.Hooks = map[string][]hooks.Group{
		"PreToolUse": {{Matcher: "Bash", Hooks: []hooks.Hook{{Type: "command", Command: "./check.sh", Timeout: 10}}}},
		"Stopp":      {{Hooks: []hooks.Hook{{Command: "./more.sh"}}}},
	}
	fmt.Println(cfg.Validate())
	// Output:
	// INVALID_ARGUMENT: hooks: hooks.Stopp: unknown event; expected one of PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit, Stop, SessionStart, PreCompact, SessionEnd, SubagentStart, SubagentStop, Notification, PermissionRequest
}
