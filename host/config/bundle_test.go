package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/plugins/hooks"
	"github.com/dsh-go/dsh/plugins/mcp"
	"github.com/dsh-go/dsh/plugins/skills"
	"github.com/dsh-go/dsh/plugins/tools/subagent"
	"github.com/dsh-go/dsh/services/protect"
)

// writeTree creates files under dir (a path ending in "/" is a folder).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(path))
		if strings.HasSuffix(path, "/") {
			os.MkdirAll(full, 0o755)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// docBundle is a bundle as Claude Code's plugins reference writes one.
var docBundle = map[string]string{
	".claude-plugin/plugin.json": `{"name": "quality", "version": "1.0.0", "description": "review and format", "author": {"name": "A"}}`,
	"commands/review.md":         "---\ndescription: Review the changes\n---\nReview $ARGUMENTS.\n",
	"skills/style/SKILL.md":      "---\nname: style\ndescription: The house style. Use when writing code.\n---\nUse tabs.\n",
	"agents/reviewer.md":         "---\nname: reviewer\ndescription: reviews diffs\n---\nYou review.\n",
	"hooks/hooks.json":           `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/scripts/guard.sh", "timeout": 5}]}]}}`,
	"scripts/guard.sh":           "#!/bin/sh\nexit 0\n",
	".mcp.json":                  `{"mcpServers": {"db": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/db", "args": ["--url", "${DB_URL:-sqlite://x}"]}, "api": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}}}`,
	"servers/db":                 "#!/bin/sh\n",
}

// setup writes the bundle under dir/quality and the config beside it, and
// parses the config from its own folder.
func parseWith(t *testing.T, yaml string, environ []string, bundles map[string]map[string]string) (*config.Config, string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, files := range bundles {
		writeTree(t, filepath.Join(dir, name), files)
	}
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: file, Environ: environ, Dir: dir})
	real, _ := filepath.EvalSymlinks(dir)
	return cfg, real, err
}

func ids(list []config.Entry) []string {
	var out []string
	for _, e := range list {
		out = append(out, e.ID+" "+e.Use)
	}
	return out
}

func TestABundleBecomesEntriesOfDshsOwnPlugins(t *testing.T) {
	cfg, dir, err := parseWith(t, `
plugins:
  - use: llm.scripted
  - bundle: ./quality
agents:
  - id: a
    provider: scripted
`, []string{"API_TOKEN=secret", "OTHER=x"}, map[string]map[string]string{"quality": docBundle})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "quality")
	want := []string{
		"llm.scripted llm.scripted",
		"quality/protect protect.paths",
		"quality/skills prompt.skills",
		"quality/commands prompt.commands",
		"quality/agents tools.agent",
		"quality/hooks hooks.command",
		"quality/mcp/api tools.mcp",
		"quality/mcp/db tools.mcp",
	}
	if got := ids(cfg.Plugins); !slices.Equal(got, want) {
		t.Fatalf("entries\n got %q\nwant %q", got, want)
	}
	for _, e := range cfg.Plugins[1:] {
		if e.From() != `bundle "quality"` {
			t.Errorf("%s: From() = %q", e.ID, e.From())
		}
	}
	if p := cfg.PluginConfig(&cfg.Plugins[1]).(*protect.PathsConfig); len(p.Paths) != 1 || p.Paths[0].Path != root {
		t.Fatalf("protected %+v; want the bundle's folder", p)
	}
	if s := cfg.PluginConfig(&cfg.Plugins[2]).(*skills.Config); !slices.Equal(s.Paths, []string{root + "/skills"}) {
		t.Fatalf("skills config %+v", s)
	}
	if c := cfg.PluginConfig(&cfg.Plugins[3]).(*commands.Config); !slices.Equal(c.Paths, []string{root + "/commands"}) {
		t.Fatalf("commands config %+v", c)
	}
	if a := cfg.PluginConfig(&cfg.Plugins[4]).(*subagent.Config); a.Name != "quality_agent" || len(a.Agents) != 1 ||
		!reflect.DeepEqual(a.Agents[0], subagent.Agent{Name: "reviewer", Description: "reviews diffs", SystemPrompt: "You review."}) {
		t.Fatalf("agents config %+v; want the agent file's name, description and body, inheriting the caller's model", a)
	}
	h := cfg.PluginConfig(&cfg.Plugins[5]).(*hooks.Config)
	wantHooks := map[string][]hooks.Group{"PreToolUse": {{Matcher: "Bash", Hooks: []hooks.Hook{{Type: "command", Command: root + "/scripts/guard.sh", Timeout: 5}}}}}
	if !reflect.DeepEqual(h.Hooks, wantHooks) || h.Env["CLAUDE_PLUGIN_ROOT"] != root {
		t.Fatalf("hooks config %+v env %v", h.Hooks, h.Env)
	}
	api := cfg.PluginConfig(&cfg.Plugins[6]).(*mcp.Config)
	if api.Name != "api" || api.URL != "https://api.example.com/mcp" || api.Headers["Authorization"] != "Bearer secret" {
		t.Fatalf("api server %+v", api)
	}
	db := cfg.PluginConfig(&cfg.Plugins[7]).(*mcp.Config)
	if db.Command != root+"/servers/db" || !slices.Equal(db.Args, []string{"--url", "sqlite://x"}) || db.Env["CLAUDE_PLUGIN_ROOT"] != root {
		t.Fatalf("db server %+v", db)
	}
	reports := cfg.Bundles()
	if len(reports) != 1 || reports[0].At != "plugins[1]" || reports[0].Name != "quality" || !slices.Equal(reports[0].Vars, []string{"API_TOKEN"}) {
		t.Fatalf("reports %+v", reports)
	}
	if slices.ContainsFunc(reports[0].Notes, func(n string) bool { return strings.Contains(n, `reviewer`) }) {
		t.Fatalf("the agent is mounted whole, yet reported: %q", reports[0].Notes)
	}
}

// TestADefectiveBundleFailsTheWholeConfig: nothing of a config with a bad
// bundle is returned, and each problem names the config line, the bundle
// file and the field.
func TestADefectiveBundleFailsTheWholeConfig(t *testing.T) {
	bad := map[string]string{
		".claude-plugin/plugin.json": `{"name": "Bad Name", "skills": "skills"}`,
		".mcp.json":                  `{"mcpServers": {"s": {"command": "x", "env": {"T": "${NOT_SET}"}}}}`,
	}
	cfg, _, err := parseWith(t, `plugins:
  - use: llm.scripted
  - bundle: ./bad
agents:
  - id: a
    provider: scripted
`, []string{}, map[string]map[string]string{"bad": bad})
	if cfg != nil || err == nil {
		t.Fatalf("config %v, err %v; want no config", cfg, err)
	}
	msg := err.Error()
	for _, want := range []string{
		`config.yaml:3: plugins[1].bundle: .claude-plugin/plugin.json: name: "Bad Name" is not a plugin name`,
		`config.yaml:3: plugins[1].bundle: .claude-plugin/plugin.json: skills: "skills" must start with "./"`,
		`config.yaml:3: plugins[1].bundle: .mcp.json: mcpServers.s.env.T: ${NOT_SET} is not set in dsh's environment`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

// TestAPartsPluginRefusesTheBundle: what the plugin behind a part refuses
// (here an event the hooks plugin does not know) fails the config, named
// by the bundle's file.
func TestAPartsPluginRefusesTheBundle(t *testing.T) {
	_, _, err := parseWith(t, `plugins:
  - bundle: ./h
`, nil, map[string]map[string]string{"h": {"hooks/hooks.json": `{"hooks": {"BeforeEverything": [{"hooks": [{"type": "command", "command": "x"}]}]}}`}})
	if err == nil || !strings.Contains(err.Error(), "plugins[0].bundle[./hooks/hooks.json].config: hooks: hooks.BeforeEverything: unknown event") {
		t.Fatalf("err %v", err)
	}
}

func TestABundleInAPresetMountsOnlyThere(t *testing.T) {
	cfg, _, err := parseWith(t, `
plugins:
  - use: llm.scripted
presets:
  quality:
    - use: tools.files
    - id: q
      bundle: ./quality
      disabled: true
agents:
  - id: a
    provider: scripted
    preset: quality
`, []string{"API_TOKEN=x"}, map[string]map[string]string{"quality": docBundle})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Plugins) != 1 {
		t.Fatalf("root entries %q", ids(cfg.Plugins))
	}
	got := ids(cfg.Presets["quality"])
	if len(got) != 8 || got[1] != "q/protect protect.paths" || got[7] != "q/mcp/db tools.mcp" {
		t.Fatalf("preset entries %q", got)
	}
	for _, e := range cfg.Presets["quality"][1:] {
		if !e.Disabled {
			t.Fatalf("%s is enabled; a disabled bundle disables every part", e.ID)
		}
	}
	if r := cfg.Bundles(); len(r) != 1 || r[0].At != "presets.quality[1]" {
		t.Fatalf("reports %+v", r)
	}
}

func TestBundleEntriesTakeOnlyIDAndDisabled(t *testing.T) {
	_, _, err := parseWith(t, `plugins:
  - bundle: ./q
    use: tools.files
    config: {x: 1}
    args: [a]
  - mcp_json: ./.mcp.json
    bundle: ./q
`, nil, nil)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		"plugins[0]: a bundle: entry takes only id:, disabled: and on_unavailable:; remove use, config, args",
		"plugins[1]: a bundle: entry takes only id:, disabled: and on_unavailable:; remove mcp_json",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestABundlePartWithoutItsPluginIsRefused(t *testing.T) {
	t.Cleanup(config.SetPartPluginsForTest("nobody.skills", "prompt.commands"))
	_, _, err := parseWith(t, `plugins:
  - bundle: ./quality
`, []string{"API_TOKEN=x"}, map[string]map[string]string{"quality": docBundle})
	if err == nil || !strings.Contains(err.Error(), `bundle "quality" has skills (./skills), and this dsh binary has no "nobody.skills" plugin`) {
		t.Fatalf("err %v", err)
	}
}

// TestMCPJSONIsReadOnlyWhenNamed: an mcp_json: entry mounts each server
// of the project file; the file lying in the folder is not enough.
func TestMCPJSONIsReadOnlyWhenNamed(t *testing.T) {
	project := map[string]string{".mcp.json": `{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-files"]}, "my.api": {"type": "http", "url": "${BASE:-http://127.0.0.1:9}/mcp"}}}`}
	cfg, _, err := parseWith(t, `plugins:
  - use: llm.scripted
agents:
  - id: a
    provider: scripted
`, nil, map[string]map[string]string{".": project})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Plugins) != 1 {
		t.Fatalf("a .mcp.json nobody named was mounted: %q", ids(cfg.Plugins))
	}
	cfg, dir, err := parseWith(t, `plugins:
  - use: llm.scripted
  - mcp_json: ./.mcp.json
agents:
  - id: a
    provider: scripted
`, nil, map[string]map[string]string{".": project})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"llm.scripted llm.scripted", "./.mcp.json/protect protect.paths", "./.mcp.json/files tools.mcp", "./.mcp.json/my.api tools.mcp"}
	if got := ids(cfg.Plugins); !slices.Equal(got, want) {
		t.Fatalf("entries %q; want %q", got, want)
	}
	api := cfg.PluginConfig(&cfg.Plugins[3]).(*mcp.Config)
	if api.Name != "my-api" || api.URL != "http://127.0.0.1:9/mcp" {
		t.Fatalf("api %+v: the name must fit tool names, the url take its default", api)
	}
	r := cfg.Bundles()[0]
	if r.Path != filepath.Join(dir, ".mcp.json") || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, `server "my.api" is mounted as "my-api"`) }) {
		t.Fatalf("report %+v", r)
	}
}

func TestTwoSourcesOfOneServerNameClash(t *testing.T) {
	_, _, err := parseWith(t, `plugins:
  - bundle: ./quality
  - mcp_json: ./.mcp.json
`, []string{"API_TOKEN=x"}, map[string]map[string]string{
		"quality": docBundle,
		".":       {".mcp.json": `{"mcpServers": {"db": {"command": "other"}}}`},
	})
	if err == nil || !strings.Contains(err.Error(), `MCP server "db" of mcp_json "./.mcp.json" has the name of one from bundle "quality"`) {
		t.Fatalf("err %v", err)
	}
}

func TestACommandFileInTheManifestIsReportedNotMounted(t *testing.T) {
	cfg, _, err := parseWith(t, `plugins:
  - bundle: ./c
`, nil, map[string]map[string]string{"c": {
		".claude-plugin/plugin.json": `{"name": "c", "commands": ["./extra/deploy.md", "./more"]}`,
		"extra/deploy.md":            "Deploy.",
		"more/status.md":             "Status.",
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.PluginConfig(&cfg.Plugins[1]).(*commands.Config)
	if len(c.Paths) != 1 || !strings.HasSuffix(c.Paths[0], "/c/more") {
		t.Fatalf("commands paths %v; want the folder only", c.Paths)
	}
	if n := cfg.Bundles()[0].Notes; !slices.ContainsFunc(n, func(s string) bool { return strings.Contains(s, "./extra/deploy.md: command file not mounted") }) {
		t.Fatalf("notes %q", n)
	}
}

// TestHookMatchersForTheBundlesOwnToolsMatchInDsh: Claude Code names a
// plugin's MCP tools mcp__plugin_<plugin>_<server>__<tool>; a bundle's
// guard written with that name is rewritten to dsh's name for the same
// tool, and one naming another plugin's tools is reported.
func TestHookMatchersForTheBundlesOwnToolsMatchInDsh(t *testing.T) {
	cfg, _, err := parseWith(t, `plugins:
  - bundle: ./kit
`, nil, map[string]map[string]string{"kit": {
		".claude-plugin/plugin.json": `{"name": "kit"}`,
		".mcp.json":                  `{"mcpServers": {"db.main": {"command": "x"}}}`,
		"hooks/hooks.json": `{"hooks": {"PreToolUse": [
			{"matcher": "mcp__plugin_kit_db.main__query|Bash", "hooks": [{"type": "command", "command": "guard"}]},
			{"matcher": "mcp__plugin_other_x__.*", "hooks": [{"type": "command", "command": "guard"}]}]}}`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var h *hooks.Config
	for i := range cfg.Plugins {
		if cfg.Plugins[i].ID == "kit/hooks" {
			h = cfg.PluginConfig(&cfg.Plugins[i]).(*hooks.Config)
		}
	}
	if got := h.Hooks["PreToolUse"][0].Matcher; got != "db-main__query|Bash" {
		t.Fatalf("matcher %q; want dsh's name for the bundle's tool", got)
	}
	notes := strings.Join(cfg.Bundles()[0].Notes, "\n")
	if !strings.Contains(notes, `hooks.PreToolUse[1].matcher "mcp__plugin_other_x__.*": names tools by Claude Code's plugin prefix`) {
		t.Fatalf("notes:\n%s", notes)
	}
}

func TestTwoBundlesOfOneNameNeedTheirOwnIDs(t *testing.T) {
	kit := map[string]string{".claude-plugin/plugin.json": `{"name": "kit"}`, "commands/a.md": "A."}
	_, _, err := parseWith(t, `plugins:
  - bundle: ./one
  - bundle: ./two
`, nil, map[string]map[string]string{"one": kit, "two": kit})
	if err == nil || !strings.Contains(err.Error(), `config.yaml:3: plugins[1].id: bundle "./two" mounts under the id "kit", as plugins[0] does; give one of them its own id:`) {
		t.Fatalf("err %v", err)
	}
	cfg, _, err := parseWith(t, `plugins:
  - bundle: ./one
  - id: kit2
    bundle: ./two
`, nil, map[string]map[string]string{"one": kit, "two": kit})
	if err != nil || ids(cfg.Plugins)[3] != "kit2/commands prompt.commands" {
		t.Fatalf("%v %q", err, ids(cfg.Plugins))
	}
}

func TestABundleAskingForAProviderKeyIsPointedOut(t *testing.T) {
	cfg, _, err := parseWith(t, `plugins:
  - mcp_json: ./.mcp.json
`, []string{"ANTHROPIC_API_KEY=sk-x"}, map[string]map[string]string{".": {".mcp.json": `{"mcpServers": {"s": {"command": "x", "env": {"K": "${ANTHROPIC_API_KEY}"}}}}`}})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Bundles()[0]
	if !slices.Equal(r.Vars, []string{"ANTHROPIC_API_KEY"}) || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "reads ANTHROPIC_API_KEY, a model provider's key") }) {
		t.Fatalf("report %+v", r)
	}
}

func TestABundleHoldingAWorkspaceIsPointedOut(t *testing.T) {
	cfg, dir, err := parseWith(t, `plugins:
  - use: llm.scripted
  - bundle: .
agents:
  - id: a
    provider: scripted
`, nil, map[string]map[string]string{".": {".claude-plugin/plugin.json": `{"name": "self"}`}})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`agent "a" works inside the bundle's folder (%s)`, dir)
	if n := cfg.Bundles()[0].Notes; !slices.ContainsFunc(n, func(s string) bool { return strings.Contains(s, want) }) {
		t.Fatalf("notes %q; want %q", n, want)
	}
}

func TestOnUnavailableReachesEveryServer(t *testing.T) {
	cfg, _, err := parseWith(t, `plugins:
  - mcp_json: ./.mcp.json
    on_unavailable: skip
`, nil, map[string]map[string]string{".": {".mcp.json": `{"mcpServers": {"a": {"command": "x"}, "b": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if c := cfg.PluginConfig(&cfg.Plugins[i]).(*mcp.Config); c.OnUnavailable != mcp.Skip {
			t.Fatalf("%s: on_unavailable %q", cfg.Plugins[i].ID, c.OnUnavailable)
		}
	}
	_, _, err = parseWith(t, `plugins:
  - mcp_json: ./.mcp.json
    on_unavailable: later
`, nil, map[string]map[string]string{".": {".mcp.json": `{"mcpServers": {}}`}})
	if err == nil || !strings.Contains(err.Error(), `plugins[0].on_unavailable: "later" is not an option`) {
		t.Fatalf("err %v", err)
	}
}
