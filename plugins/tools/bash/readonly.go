package bash

import (
	"encoding/json"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// readOnlyCall is bash's Tool.ReadOnlyCall: a command line that only reads,
// as tools.permission judges it (permission.ReadOnlyCommand), so plan mode
// lets `git log` or `grep -rn` run and refuses `sed -i`.
func readOnlyCall(c tools.Call) (bool, string) {
	var args struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(c.Arguments, &args) != nil || args.Command == nil {
		return false, "the call has no command to judge"
	}
	return permission.ReadOnlyCommand(*args.Command, c.Workspace)
}
