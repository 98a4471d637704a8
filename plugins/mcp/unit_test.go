package mcp

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	for tool, want := range map[string]string{
		"search_issues": "github__search_issues",
		"get-file":      "github__get-file",
	} {
		if got := toolName("github", tool); got != want {
			t.Errorf("%s: %s, want %s", tool, got, want)
		}
	}
	// Names that had to change keep a suffix of their own, so two that
	// sanitize alike stay apart, and the same tool always gets the same
	// name.
	a, b := toolName("github", "repo.read"), toolName("github", "repo/read")
	if a == b || !strings.HasPrefix(a, "github__repo_read_") || a != toolName("github", "repo.read") {
		t.Fatalf("%s vs %s", a, b)
	}
	if c := toolName("github", "repo_read"); c == a || c != "github__repo_read" {
		t.Fatalf("an unchanged name keeps its plain form: %s", c)
	}
	long := strings.Repeat("x", 80)
	l1, l2 := toolName("github", long), toolName("github", long+"y")
	if len(l1) != 64 || l1 == l2 {
		t.Fatalf("long names: %s %s", l1, l2)
	}
	for _, n := range []string{a, b, l1, l2, toolName("s", ""), toolName("s", "ünïcode tool")} {
		if !providerName.MatchString(n) {
			t.Errorf("%q does not match what providers accept", n)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{}.Defaults()
	ok.Name, ok.Command = "github", "npx"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Name = "" }, "name is missing"},
		{func(c *Config) { c.Name = "a__b" }, "not usable in tool names"},
		{func(c *Config) { c.Name = "a.b" }, "not usable in tool names"},
		{func(c *Config) { c.URL = "http://x" }, "both set"},
		{func(c *Config) { c.Command = "" }, "neither command nor url"},
		{func(c *Config) { c.Command, c.URL = "", "ftp://x" }, "not an http:// or https:// URL"},
		{func(c *Config) { c.Headers = map[string]string{"a": "b"} }, "headers and bearer_token_env apply to an HTTP server"},
		{func(c *Config) { c.Command, c.URL, c.Cwd = "", "http://x", "d" }, "apply to a stdio server"},
		{func(c *Config) { c.OnUnavailable = "retry" }, `on_unavailable is "retry"`},
		{func(c *Config) { c.CallTimeout = 0 }, "call_timeout is 0s"},
		{func(c *Config) { c.MaxResultBytes = 10 }, "max_result_bytes is 10"},
		{func(c *Config) { c.Approval = "maybe" }, `approval is "maybe"`},
		{func(c *Config) { c.RestartBackoffMax = 1 }, "restart_backoff_max"},
	} {
		cfg := ok
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

func TestCapTextCutsOnACharacterBoundary(t *testing.T) {
	s := strings.Repeat("é", 10) // 20 bytes
	got, kept := capText(s, 5)
	if kept != 4 || !strings.HasPrefix(got, "éé\n[result cut: the first 4 of 20 bytes") {
		t.Fatalf("%q", got)
	}
	if got, kept := capText("short", 5); got != "short" || kept != 5 {
		t.Fatal("a text within the cap must stay as it is")
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	var lines []string
	tl := &tail{line: func(l string) { lines = append(lines, l) }}
	tl.Write([]byte(strings.Repeat("a", tailMax)))
	tl.Write([]byte("\nlast line\n"))
	if got := tl.String(); len(got) > tailMax || !strings.HasSuffix(got, "last line") {
		t.Fatalf("tail %d bytes ending %q", len(got), got[len(got)-20:])
	}
	if len(lines) != 2 || lines[1] != "last line" {
		t.Fatalf("lines %d", len(lines))
	}
}

func TestBackoffDoublesToTheCapAndResetsAfterAStableRun(t *testing.T) {
	c := Config{}.Defaults() // 500ms up to 30s, stable after 30s
	b := c.RestartBackoff
	var seen []time.Duration
	for range 8 {
		seen = append(seen, b)
		b = c.wait(2*b, time.Second)
	}
	if seen[1] != time.Second || seen[2] != 2*time.Second || seen[7] != 30*time.Second {
		t.Fatalf("backoffs %v", seen)
	}
	if got := c.wait(2*b, time.Minute); got != c.RestartBackoff {
		t.Fatalf("after a stable run the wait starts over: %s", got)
	}
}
