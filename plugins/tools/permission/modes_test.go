package permission_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

func TestModesDecideWhatNoRuleMatches(t *testing.T) {
	type call struct {
		tool string
		args any
	}
	calls := map[string]call{
		"read":       {"read", onPath("a.go")},
		"grep":       {"grep", map[string]string{"pattern": "x"}},
		"clock":      {"clock", map[string]string{}},
		"write":      {"write", onPath("a.go")},
		"edit":       {"edit", onPath("a.go")},
		"bash":       {"bash", map[string]string{"command": "ls"}},
		"plugin":     {"mcp_search", map[string]string{}},
		"write-here": {"bash", map[string]string{"command": "echo x > notes/out.txt"}},
	}
	cases := []struct {
		mode permission.Mode
		want map[string]tools.Decision
	}{
		{permission.ReadOnly, map[string]tools.Decision{"read": tools.Allow, "grep": tools.Allow, "clock": tools.Allow,
			"write": tools.Deny, "edit": tools.Deny, "bash": tools.Deny, "plugin": tools.Deny, "write-here": tools.Deny}},
		{permission.WorkspaceWrite, map[string]tools.Decision{"read": tools.Allow, "grep": tools.Allow, "clock": tools.Allow,
			"write": tools.Allow, "edit": tools.Allow, "bash": tools.Ask, "plugin": tools.Allow /* its default */, "write-here": tools.Ask}},
		{permission.FullAccess, map[string]tools.Decision{"read": tools.Allow, "grep": tools.Allow, "clock": tools.Allow,
			"write": tools.Allow, "edit": tools.Allow, "bash": tools.Allow, "plugin": tools.Allow, "write-here": tools.Allow}},
		{"", map[string]tools.Decision{"read": tools.Allow, "grep": tools.Allow, "clock": tools.Allow,
			"write": tools.Allow, "edit": tools.Allow, "bash": tools.Ask, "plugin": tools.Allow, "write-here": tools.Ask}},
	}
	for _, c := range cases {
		root := policyOf(t, permission.Config{Mode: c.mode})
		for name, want := range c.want {
			cl := calls[name]
			if v := approve(t, root, cl.tool, cl.args); v.Decision != want {
				t.Errorf("mode %q, %s: got %+v, want %s", c.mode, name, v, want)
			}
		}
	}
}

func TestReadOnlyDenialNamesTheMode(t *testing.T) {
	v := approve(t, policyOf(t, permission.Config{Mode: permission.ReadOnly}), "write", onPath("a"))
	if v.Source != "tools.permission:mode=read-only" || !strings.Contains(v.Reason, "read-only mode") || !strings.Contains(v.Reason, `"write"`) {
		t.Fatalf("got %+v", v)
	}
}

func TestRulesComeBeforeTheMode(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.ReadOnly, Rules: []permission.Rule{
		{Command: "git status", Decision: tools.Allow},
		{Tool: "read", Path: "secrets/**", Decision: tools.Deny},
	}})
	if v := bash(root, t, "git status"); v.Decision != tools.Allow {
		t.Fatalf("a rule allows bash in read-only: %+v", v)
	}
	if v := bash(root, t, "git status && git push"); v.Decision != tools.Deny {
		t.Fatalf("the unmatched command falls to the mode: %+v", v)
	}
	if v := approve(t, root, "read", onPath("secrets/key")); v.Decision != tools.Deny {
		t.Fatalf("a rule denies a read tool in read-only: %+v", v)
	}
}

// TestRedirectionsFollowTheModesWriteRules: even a command a rule allows
// may not write where the mode does not.
func TestRedirectionsFollowTheModesWriteRules(t *testing.T) {
	echo := []permission.Rule{{Command: "echo *", Decision: tools.Allow}}
	ww := policyOf(t, permission.Config{Mode: permission.WorkspaceWrite, Rules: echo})
	ro := policyOf(t, permission.Config{Mode: permission.ReadOnly, Rules: echo})
	full := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: echo})
	cases := []struct {
		command      string
		ww, ro, full tools.Decision
	}{
		{"echo hi", tools.Allow, tools.Allow, tools.Allow},
		{"echo hi > notes.txt", tools.Allow, tools.Deny, tools.Allow},
		{"echo hi >> " + workspace + "/log", tools.Allow, tools.Deny, tools.Allow},
		{"echo hi > /etc/hosts", tools.Ask, tools.Deny, tools.Allow},
		{"echo hi > ../outside", tools.Ask, tools.Deny, tools.Allow},
		{"echo hi > ~/.bashrc", tools.Ask, tools.Deny, tools.Allow},
		{`echo hi > "$TARGET"`, tools.Ask, tools.Deny, tools.Allow},
		{"echo hi > /dev/null 2>&1", tools.Allow, tools.Allow, tools.Allow},
		{"echo hi >&2", tools.Allow, tools.Allow, tools.Allow},
		{"echo hi > /dev/fd/2", tools.Allow, tools.Allow, tools.Allow},
		// Only /dev/fd/N is a descriptor: past it the path is a file
		// (/dev/fd/../../../etc/hosts is /etc/hosts).
		{"echo hi > /dev/fd/../../../etc/hosts", tools.Ask, tools.Deny, tools.Allow},
		{"echo hi > /dev/fd/1/../../../../etc/hosts", tools.Ask, tools.Deny, tools.Allow},
		{"echo hi > /dev/fd/", tools.Ask, tools.Deny, tools.Allow},
	}
	for _, c := range cases {
		if v := bash(ww, t, c.command); v.Decision != c.ww {
			t.Errorf("workspace-write %q: got %+v, want %s", c.command, v, c.ww)
		}
		if v := bash(ro, t, c.command); v.Decision != c.ro {
			t.Errorf("read-only %q: got %+v, want %s", c.command, v, c.ro)
		}
		if v := bash(full, t, c.command); v.Decision != c.full {
			t.Errorf("full-access %q: got %+v, want %s", c.command, v, c.full)
		}
	}
	v := bash(ww, t, "echo hi > /etc/hosts")
	if !strings.Contains(v.Reason, "outside the workspace") || !strings.Contains(v.Reason, "> /etc/hosts") {
		t.Fatalf("the reason names the redirection: %+v", v)
	}
}
