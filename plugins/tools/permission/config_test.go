package permission_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

func TestValidateNamesTheKeyAtFault(t *testing.T) {
	cases := []struct {
		name string
		cfg  permission.Config
		want []string
	}{
		{"unknown mode", permission.Config{Mode: "yolo"}, []string{`mode: "yolo" is not a mode`, "workspace-write"}},
		{"unknown decision", permission.Config{Rules: []permission.Rule{{Tool: "read", Decision: "maybe"}}}, []string{`rules[0].decision: "maybe" is not allow, deny or ask`}},
		{"missing decision", permission.Config{Rules: []permission.Rule{{Tool: "read"}}}, []string{"rules[0].decision: missing"}},
		{"empty rule", permission.Config{Rules: []permission.Rule{{Tool: "read", Decision: tools.Allow}, {Decision: tools.Deny}}}, []string{"rules[1]: an empty rule"}},
		{"bad tool glob", permission.Config{Rules: []permission.Rule{{Tool: "re[ad", Decision: tools.Deny}}}, []string{"rules[0].tool:", "never closed"}},
		{"bad command word", permission.Config{Rules: []permission.Rule{{Command: "git [", Decision: tools.Deny}}}, []string{"rules[0].command:", `word 2 "["`}},
		{"long command", permission.Config{Rules: []permission.Rule{{Command: "x" + strings.Repeat(" y", 63), Decision: tools.Deny}}}, []string{"rules[0].command: has 64 words; a pattern has at most 63"}},
		{"blank command", permission.Config{Rules: []permission.Rule{{Command: "  ", Decision: tools.Deny}}}, []string{"rules[0].command: the pattern is blank"}},
		{"command on another tool", permission.Config{Rules: []permission.Rule{{Tool: "read", Command: "git *", Decision: tools.Deny}}}, []string{"rules[0].command: applies to the bash tool only"}},
		{"path on bash", permission.Config{Rules: []permission.Rule{{Tool: "bash", Path: "src/**", Decision: tools.Deny}}}, []string{"rules[0].path: bash takes a command"}},
		{"command and path", permission.Config{Rules: []permission.Rule{{Command: "ls", Path: "src/**", Decision: tools.Deny}}}, []string{"rules[0]: command is for bash and path for the file tools"}},
		{"bad path", permission.Config{Rules: []permission.Rule{{Tool: "read", Path: "src/[a", Decision: tools.Deny}}}, []string{`rules[0].path: "src/[a" is not a valid doublestar pattern`}},
		{"empty deny name", permission.Config{Deny: []string{"bash", ""}}, []string{"deny[1]: a tool name is empty"}},
		{"bad allow glob", permission.Config{Allow: []string{"[x"}}, []string{"allow[0]:"}},
		{"every problem at once", permission.Config{Mode: "x", Rules: []permission.Rule{{Decision: "y", Tool: "a"}}}, []string{"mode:", "rules[0].decision"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if !errs.Has(err, errs.InvalidArgument, "") {
				t.Fatalf("want INVALID_ARGUMENT, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestValidateAcceptsWhatTheDocsShow(t *testing.T) {
	cfg := permission.Config{
		Mode: permission.WorkspaceWrite,
		Rules: []permission.Rule{
			{Command: "git *", Decision: tools.Allow},
			{Tool: "bash", Command: "rm *", Decision: tools.Deny, Reason: "use the edit tools to remove files"},
			{Path: "**/.env", Decision: tools.Deny},
			{Tool: "write", Path: "/tmp/**", Decision: tools.Allow},
			{Tool: "mcp_*", Decision: tools.Ask},
			{Tool: "*", Decision: tools.Ask},
		},
		Deny:  []string{"web_fetch"},
		Allow: []string{"read", "bash"},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (permission.Config{}).Validate(); err != nil {
		t.Fatalf("the empty config is valid: %v", err)
	}
}

// TestApplyRefusesAnInvalidConfig: a Go caller cannot bypass Validate.
func TestApplyRefusesAnInvalidConfig(t *testing.T) {
	root := newRoot(t)
	f, err := root.Plugin(permission.Plugin, permission.Config{Mode: "yolo"})
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) || !strings.Contains(err.Error(), "tools.permission") {
		t.Fatalf("got %v", err)
	}
}
