package skills

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

// ToolName is the tool the model loads a skill with.
const ToolName = "skill"

var toolSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":64,"description":"the skill's name, as listed under available_skills in the system prompt"}},"required":["name"],"additionalProperties":false}`)

// tool loads a skill's body. It rescans the agent's folders, so it
// answers with the file as it is now.
func (sh *shared) tool() tools.Tool {
	return tools.Tool{
		Name:         ToolName,
		Description:  "Load an Agent Skill: returns the instructions of the named skill (see available_skills in the system prompt) and the folder its other files are in.",
		Parameters:   toolSchema,
		ParallelSafe: true,
		// Loading a skill reads its file: plan mode lets it run.
		ReadOnly: true,
		Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
			var args struct {
				Name string `json:"name"`
			}
			d := json.NewDecoder(bytes.NewReader(c.Arguments))
			d.DisallowUnknownFields()
			if err := d.Decode(&args); err != nil {
				return tools.Result{}, fmt.Errorf("the arguments are not {\"name\": \"<skill>\"}: %v", err)
			}
			list, _ := sh.files.scan(sh.dirs())
			for _, s := range list {
				if s.Name == args.Name {
					return tools.Result{Content: body(s)}, nil
				}
			}
			names := make([]string, len(list))
			for i, s := range list {
				names[i] = s.Name
			}
			known := "none is installed"
			if len(names) > 0 {
				known = "the skills are: " + strings.Join(names, ", ")
			}
			return tools.Result{}, errs.New(Unknown, fmt.Sprintf("no skill is named %q; %s", args.Name, known)).WithReason("skills/unknown")
		},
	}
}

// body is what the model gets for s: where the skill lives, then its
// instructions.
func body(s Skill) string {
	return fmt.Sprintf("Skill %q, from %s.\nIts folder is %s: paths in the instructions below are relative to it; read those files with the file tools.\n\n%s",
		s.Name, s.File, s.Dir, s.Body)
}
