package permission_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// TestPromptTellsAModesAskFromARules: the asks a hook's allow may skip
// are the mode's and the unreadable command's, never an ask rule's, a
// deny, or the tool's own default (which no policy made).
func TestPromptTellsAModesAskFromARules(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.WorkspaceWrite, Rules: []permission.Rule{
		{Tool: "bash", Command: "git push *", Decision: tools.Ask},
		{Tool: "bash", Command: "rm *", Decision: tools.Deny},
	}})
	cases := map[string]bool{"make": true, "git push": false, "rm -rf x": false}
	for command, want := range cases {
		v := bash(root, t, command)
		if got := permission.Prompt(v); got != want {
			t.Errorf("%s: Prompt(%+v) = %v, want %v", command, v, got, want)
		}
	}
	// A command known only at run time, with no rule it could meet.
	if v := bash(policyOf(t, permission.Config{}), t, "$CMD"); !permission.Prompt(v) {
		t.Errorf("$CMD: Prompt(%+v) = false", v)
	}
	if permission.Prompt(tools.Verdict{Decision: tools.Ask}) || permission.Prompt(tools.Verdict{Decision: tools.Ask, Source: "tools.permissionx:mode=x"}) {
		t.Error("an ask no tools.permission made is not its prompt")
	}
}
