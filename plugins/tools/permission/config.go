package permission

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

// Mode is a whole policy in one word: what the plugin decides for a call
// no rule matches.
type Mode string

// Modes.
const (
	// ReadOnly allows the read tools (ReadTools) and denies everything else.
	ReadOnly Mode = "read-only"
	// WorkspaceWrite allows the file tools (FileTools), which are confined
	// to the workspace, and asks before each bash command.
	WorkspaceWrite Mode = "workspace-write"
	// FullAccess allows every call.
	FullAccess Mode = "full-access"
)

// ReadTools are the tools read-only mode allows: they read the workspace
// or the clock and change nothing. A list of names rather than a property
// of the tool, so what a mode allows does not change when a plugin adds a
// tool; allow another tool with a rule.
var ReadTools = []string{"read", "list", "glob", "grep", "clock"}

// FileTools are the tools workspace-write mode allows besides ReadTools:
// they write only inside the workspace.
var FileTools = []string{"write", "edit"}

// maxPatternWords bounds a command pattern, so matching a command against
// it takes one machine word of state.
const maxPatternWords = 63

// BashTool is the name of the tool whose command rules judge.
const BashTool = "bash"

// Config is the plugin's configuration.
type Config struct {
	// Mode decides the calls no rule matches; "" leaves them to the
	// policies mounted inside this one and to the tool's default.
	Mode Mode `koanf:"mode" json:"mode,omitempty"`
	// Rules are tried in order; the first that matches a call decides it.
	Rules []Rule `koanf:"rules" json:"rules,omitempty"`
	// Deny lists tools that may not run, before any rule.
	Deny []string `koanf:"deny" json:"deny,omitempty"`
	// Allow, when set, lists the only tools that may run: the others are
	// denied before any rule, these allowed after the rules.
	Allow []string `koanf:"allow" json:"allow,omitempty"`
}

// Rule decides the calls it matches: those of a tool named Tool whose
// bash command matches Command, or whose path arguments match Path.
type Rule struct {
	// Tool is a tool name or a glob over names (*, ?, [...]); "" means
	// bash when Command is set, and every tool otherwise.
	Tool string `koanf:"tool" json:"tool,omitempty"`
	// Command (bash only) is a pattern for one simple command: words
	// separated by spaces, each a glob over one word (`git status`,
	// `rm -r*`); a last word * stands for any further words (`git *`).
	Command string `koanf:"command" json:"command,omitempty"`
	// Path (tools with a path argument) is a doublestar pattern, relative
	// to the workspace unless it starts with /.
	Path string `koanf:"path" json:"path,omitempty"`
	// Decision is allow, deny or ask.
	Decision tools.Decision `koanf:"decision" json:"decision"`
	// Reason tells the model (on deny) or the person asked (on ask) why.
	Reason string `koanf:"reason" json:"reason,omitempty"`
}

// Validate refuses what the plugin could not apply as written, naming the
// key at fault.
func (c Config) Validate() error {
	var problems []string
	switch c.Mode {
	case "", ReadOnly, WorkspaceWrite, FullAccess:
	default:
		problems = append(problems, fmt.Sprintf("mode: %q is not a mode; use read-only, workspace-write or full-access (or leave it out)", c.Mode))
	}
	for i, r := range c.Rules {
		if _, err := compileRule(r, fmt.Sprintf("rules[%d]", i)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"deny", c.Deny}, {"allow", c.Allow}} {
		for i, n := range list.names {
			if _, err := toolGlob(n); err != nil {
				problems = append(problems, fmt.Sprintf("%s[%d]: %v", list.key, i, err))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errs.New(errs.InvalidArgument, strings.Join(problems, "; "))
}

// compileRule checks r and turns its patterns into matchers; where names
// the rule in messages and verdicts ("rules[2]").
func compileRule(r Rule, where string) (rule, error) {
	out := rule{where: where, path: r.Path, decision: r.Decision, reason: r.Reason}
	fail := func(key, format string, a ...any) (rule, error) {
		return rule{}, fmt.Errorf("%s.%s: %s", where, key, fmt.Sprintf(format, a...))
	}
	switch r.Decision {
	case tools.Allow, tools.Deny, tools.Ask:
	case "":
		return fail("decision", "missing; say allow, deny or ask")
	default:
		return fail("decision", "%q is not allow, deny or ask", r.Decision)
	}
	if r.Tool == "" && r.Command == "" && r.Path == "" {
		return rule{}, fmt.Errorf("%s: an empty rule would match every call; give a tool, a command or a path (tool: \"*\" matches every tool on purpose)", where)
	}
	if r.Tool != "" {
		re, err := toolGlob(r.Tool)
		if err != nil {
			return fail("tool", "%v", err)
		}
		out.tool = re
	}
	if r.Command != "" && r.Path != "" {
		return rule{}, fmt.Errorf("%s: command is for bash and path for the file tools; write two rules", where)
	}
	if r.Command != "" {
		if r.Tool != "" && r.Tool != BashTool {
			return fail("command", "applies to the %s tool only, but the rule's tool is %q; drop tool or set it to %s", BashTool, r.Tool, BashTool)
		}
		out.tool = regexp.MustCompile("^" + BashTool + "$")
		p, err := compileCommand(r.Command)
		if err != nil {
			return fail("command", "%v", err)
		}
		fields := strings.Fields(r.Command)
		if len(fields) > maxPatternWords {
			return fail("command", "has %d words; a pattern has at most %d (end it with * to match any further words)", len(fields), maxPatternWords)
		}
		out.command, out.pattern, out.words, out.anyRest = p, r.Command, fields, fields[len(fields)-1] == "*"
		out.progSlash = strings.Contains(fields[0], "/")
	}
	if r.Path != "" {
		if r.Tool == BashTool {
			return fail("path", "bash takes a command, not a path; match its arguments with command")
		}
		if !doublestar.ValidatePattern(r.Path) {
			return fail("path", "%q is not a valid doublestar pattern (check its brackets and braces)", r.Path)
		}
	}
	return out, nil
}

func toolGlob(g string) (*regexp.Regexp, error) {
	if g == "" {
		return nil, fmt.Errorf("a tool name is empty")
	}
	re, err := globRegexp(g)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid tool name or glob: %v", g, err)
	}
	return re, nil
}
