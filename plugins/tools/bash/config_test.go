package bash_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/tools/bash"
)

// TestTheNetworkSettingTakesEveryForm: off, on, the booleans of earlier
// versions, and domain lists, which mean the egress proxy.
func TestTheNetworkSettingTakesEveryForm(t *testing.T) {
	for _, c := range []struct {
		in   any
		want bash.NetworkPolicy
	}{
		{nil, bash.NetworkPolicy{Mode: sandbox.NetworkOff}},
		{false, bash.NetworkPolicy{Mode: sandbox.NetworkOff}},
		{true, bash.NetworkPolicy{Mode: sandbox.NetworkOn}},
		{"off", bash.NetworkPolicy{Mode: sandbox.NetworkOff}},
		{"on", bash.NetworkPolicy{Mode: sandbox.NetworkOn}},
	} {
		got, err := bash.SandboxConfig{Network: c.in}.Policy()
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%#v: got %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	lists, err := bash.SandboxConfig{Network: map[string]any{"allow": []any{"github.com", "*.golang.org"}, "deny": []any{"evil.example"}}}.Policy()
	if err != nil || lists.Mode != sandbox.NetworkProxied || lists.Egress.String() != "allow-list (allow: github.com, *.golang.org; deny: evil.example)" {
		t.Errorf("domain lists: got %+v (%s), %v; want the proxied network with both lists", lists, lists.Egress.String(), err)
	}
	for _, bad := range []any{"maybe", 3, map[string]any{"allowed": []any{"x"}}, map[string]any{"deny": []any{""}}, map[string]any{"allow": []any{}}, map[string]any{"allow": []any{"exa mple.com"}}} {
		c := bash.Config{}.Defaults()
		c.Sandbox.Network = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sandbox.network") {
			t.Errorf("%#v: want an error naming sandbox.network, got %v", bad, err)
		}
	}
}

func TestTheDefaultsProtectGitAndInstructions(t *testing.T) {
	c := bash.Config{}.Defaults()
	for _, p := range []string{".git/config", ".git/hooks", ".git/info", ".claude", ".agents", "AGENTS.md", "CLAUDE.md", ".mcp.json"} {
		if !strings.Contains(strings.Join(c.Sandbox.ReadOnly, " "), p) {
			t.Errorf("the default read_only lacks %s", p)
		}
	}
	for _, bad := range []string{"../x", "a/../../b", ""} {
		c := bash.Config{}.Defaults()
		c.Sandbox.ReadOnly = []string{bad}
		if err := c.Validate(); err == nil {
			t.Errorf("read_only %q must be refused", bad)
		}
	}
	c.Sandbox.UID = -1
	if err := c.Validate(); err == nil {
		t.Error("a negative sandbox.uid must be refused")
	}
}

func TestHomeFilesMustStayInTheHome(t *testing.T) {
	for _, bad := range []string{"/etc/passwd", "../x", ".", ""} {
		c := bash.Config{}.Defaults()
		c.Sandbox.HomeFiles = []string{bad}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sandbox.home_files") {
			t.Errorf("home_files %q: want an error naming sandbox.home_files, got %v", bad, err)
		}
	}
	c := bash.Config{}.Defaults()
	c.Sandbox.HomeFiles = []string{".gitconfig", "go/pkg/mod"}
	if err := c.Validate(); err != nil {
		t.Errorf("relative home files are fine: %v", err)
	}
}
