package permission_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

func TestRulesByToolName(t *testing.T) {
	rules := []permission.Rule{
		{Tool: "write", Decision: tools.Deny, Reason: "this agent only reads"},
		{Tool: "mcp_*", Decision: tools.Ask},
		{Tool: "gr?p", Decision: tools.Allow},
		{Tool: "[lr]ead", Decision: tools.Deny},
	}
	cases := []struct {
		tool string
		want tools.Decision
	}{
		{"write", tools.Deny},
		{"mcp_github_search", tools.Ask},
		{"grep", tools.Allow},
		{"lead", tools.Deny},
		{"read", tools.Deny},
		{"edit", tools.Allow}, // no rule: the tool's default
		{"bash", tools.Ask},   // no rule: bash's default
	}
	root := policyOf(t, permission.Config{Rules: rules})
	for _, c := range cases {
		if v := approve(t, root, c.tool, map[string]string{}); v.Decision != c.want {
			t.Errorf("%s: got %+v, want %s", c.tool, v, c.want)
		}
	}
}

func TestTheFirstMatchingRuleDecidesAndSaysWhichItIs(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Tool: "read", Decision: tools.Allow},
		{Tool: "write", Decision: tools.Deny, Reason: "this agent only reads"},
		{Tool: "*", Decision: tools.Deny},
	}})
	if v := approve(t, root, "read", onPath("a")); v.Decision != tools.Allow || v.Source != "tools.permission:rules[0]" {
		t.Fatalf("read: %+v", v)
	}
	v := approve(t, root, "write", onPath("a.txt"))
	if v.Decision != tools.Deny || v.Source != "tools.permission:rules[1]" ||
		v.Reason != `the tool "write" on "a.txt" is denied by tools.permission:rules[1]: this agent only reads` {
		t.Fatalf("write: %+v", v)
	}
	if v := approve(t, root, "edit", onPath("a")); v.Decision != tools.Deny || v.Source != "tools.permission:rules[2]" {
		t.Fatalf("edit: %+v", v)
	}
}

func TestRulesByPath(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Path: "**/.env", Decision: tools.Deny, Reason: "secrets"},
		{Tool: "write", Path: "docs/**", Decision: tools.Allow},
		{Tool: "write", Path: "/tmp/**", Decision: tools.Allow},
		{Tool: "write", Decision: tools.Ask},
		{Tool: "glob", Path: "**", Decision: tools.Allow},
		{Tool: "glob", Decision: tools.Deny},
	}})
	cases := []struct {
		name string
		tool string
		args any
		want tools.Decision
	}{
		{"denied name anywhere", "read", onPath("src/app/.env"), tools.Deny},
		{"denied at the top", "read", onPath(".env"), tools.Deny},
		{"absolute inside the workspace", "read", onPath(workspace + "/.env"), tools.Deny},
		{"file_path counts", "edit", map[string]string{"file_path": "x/.env"}, tools.Deny},
		{"one denied path among many", "read", map[string]any{"paths": []string{"a.go", "b/.env"}}, tools.Deny},
		{"allowed tree", "write", onPath("docs/guide/intro.md"), tools.Allow},
		{"dot-dot back into the tree", "write", onPath("src/../docs/a.md"), tools.Allow},
		{"dot-dot out of the tree", "write", onPath("docs/../src/a.go"), tools.Ask},
		{"relative pattern never matches outside", "write", onPath("../docs/a.md"), tools.Ask},
		{"absolute pattern", "write", onPath("/tmp/scratch/x"), tools.Allow},
		{"absolute pattern, relative path outside it", "write", onPath("tmp/x"), tools.Ask},
		{"no path argument: path rules pass", "write", map[string]string{"content": "x"}, tools.Ask},
		{"allow needs every path", "glob", map[string]any{"paths": []string{"a", "/etc"}}, tools.Deny},
		{"allow with every path inside", "glob", map[string]any{"paths": []string{"a", "b/c"}}, tools.Allow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := approve(t, root, c.tool, c.args); v.Decision != c.want {
				t.Fatalf("got %+v, want %s", v, c.want)
			}
		})
	}
}

func TestCommandPatterns(t *testing.T) {
	cases := []struct {
		pattern, command string
		match            bool
	}{
		{"git status", "git status", true},
		{"git status", "git status -s", false},
		{"git status", "git", false},
		{"git status *", "git status -s", true},
		{"git *", "git", true},
		{"git *", "git push --force origin main", true},
		{"git *", "gitk", false},
		{"git * main", "git push main", true},
		{"git * main", "git push origin main", false},
		{"rm -r*", "rm -rf", true},
		{"rm -r*", "rm -f", false},
		{"cat /etc/*", "cat /etc/ssl/certs", true},
		{"rm *", "/bin/rm -rf x", true},
		{"/usr/bin/rm *", "rm x", false},
		{"/usr/bin/rm *", "/usr/bin/rm x", true},
		{"*", "anything at all", true},
		{`echo \*`, "echo *", true},
		{`echo \*`, "echo x", false},
		{"go test ./...", "go test ./...", true},
	}
	for _, c := range cases {
		root := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: c.pattern, Decision: tools.Deny}}})
		got := bash(root, t, c.command).Decision == tools.Deny
		if got != c.match {
			t.Errorf("pattern %q on %q: matched %v, want %v", c.pattern, c.command, got, c.match)
		}
	}
}

// TestAWordKnownOnlyAtRunTimeNeverWidensAnAllow: $X could be anything, so
// it matches every word of a deny rule and only * of an allow rule.
func TestAWordKnownOnlyAtRunTimeNeverWidensAnAllow(t *testing.T) {
	allow := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Command: "git status", Decision: tools.Allow},
		{Command: "ls *", Decision: tools.Allow},
	}})
	if v := bash(allow, t, "git $SUB"); v.Decision != tools.Ask {
		t.Fatalf("git $SUB must not meet `git status`: %+v", v)
	}
	if v := bash(allow, t, "ls $DIR"); v.Decision != tools.Allow {
		t.Fatalf("ls $DIR meets `ls *`: %+v", v)
	}
	deny := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "git push *", Decision: tools.Deny}}})
	if v := bash(deny, t, `git "$VERB" origin`); v.Decision != tools.Deny {
		t.Fatalf(`git "$VERB" may be git push: %+v`, v)
	}
}

func TestOldListsKeepTheirMeaning(t *testing.T) {
	deny := policyOf(t, permission.Config{Deny: []string{"bash"}})
	v := bash(deny, t, "ls")
	if v.Decision != tools.Deny || v.Source != "tools.permission:deny[0]" || !strings.Contains(v.Reason, "deny list") {
		t.Fatalf("deny list: %+v", v)
	}
	if v := approve(t, deny, "read", onPath("a")); v.Decision != tools.Allow {
		t.Fatalf("a tool off the deny list keeps its default: %+v", v)
	}

	allow := policyOf(t, permission.Config{Allow: []string{"read", "bash"}})
	if v := approve(t, allow, "write", onPath("a")); v.Decision != tools.Deny || !strings.Contains(v.Reason, "not in the allow list") {
		t.Fatalf("a tool outside the allow list is denied: %+v", v)
	}
	if v := bash(allow, t, "rm -rf ~"); v.Decision != tools.Allow {
		t.Fatalf("a tool in the allow list is allowed: %+v", v)
	}

	// Deny beats allow; rules come between the two lists.
	both := policyOf(t, permission.Config{
		Deny:  []string{"bash"},
		Allow: []string{"bash", "write", "read"},
		Rules: []permission.Rule{{Tool: "write", Decision: tools.Ask}, {Tool: "edit", Decision: tools.Allow}},
	})
	for tool, want := range map[string]tools.Decision{"bash": tools.Deny, "write": tools.Ask, "read": tools.Allow, "edit": tools.Deny} {
		if v := approve(t, both, tool, map[string]string{"command": "ls"}); v.Decision != want {
			t.Errorf("%s: got %+v, want %s", tool, v, want)
		}
	}
}
