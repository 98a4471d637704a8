package bundle

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// documented is a bundle laid out as Claude Code's plugins reference lays
// one out: a manifest in .claude-plugin/, and each part in its default
// folder, with ${CLAUDE_PLUGIN_ROOT} where the reference uses it.
var documented = map[string]string{
	".claude-plugin/plugin.json": `{
  "name": "my-first-plugin",
  "description": "A greeting plugin to learn the basics",
  "version": "1.0.0",
  "author": {"name": "Your Name"},
  "homepage": "https://example.com",
  "repository": "https://github.com/example/my-first-plugin",
  "license": "MIT",
  "keywords": ["greeting"]
}`,
	"commands/hello.md":           "---\ndescription: Greet the user with a personalized message\n---\n\n# Hello Command\n\nGreet the user named \"$ARGUMENTS\" warmly.\n",
	"skills/code-review/SKILL.md": "---\nname: code-review\ndescription: Reviews code for best practices and potential issues. Use when reviewing code.\n---\n\nWhen reviewing code, check for organization, error handling and security.\n",
	"agents/security-reviewer.md": "---\nname: security-reviewer\ndescription: Reviews code for security vulnerabilities\n---\n\nYou are a security expert.\n",
	"hooks/hooks.json": `{
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Write|Edit",
        "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/scripts/format-code.sh", "timeout": 30}]
      }
    ]
  }
}`,
	"scripts/format-code.sh": "#!/bin/sh\nexit 0\n",
	".mcp.json": `{
  "mcpServers": {
    "plugin-database": {
      "command": "${CLAUDE_PLUGIN_ROOT}/servers/db-server",
      "args": ["--config", "${CLAUDE_PLUGIN_ROOT}/config.json"],
      "env": {"DB_PATH": "${CLAUDE_PLUGIN_ROOT}/data", "DB_URL": "${DB_URL}"}
    },
    "plugin-api": {"type": "http", "url": "${API_BASE:-https://api.example.com}/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}
  }
}`,
}

func TestLoadReadsEveryPartOfADocumentedBundle(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, documented)
	b, err := Load(dir, env("DB_URL=postgres://db", "API_TOKEN=t0k", "UNUSED=1"))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(dir)
	if b.Root != root || b.Name != "my-first-plugin" || b.Manifest != filepath.Join(root, ".claude-plugin/plugin.json") {
		t.Fatalf("root %q name %q manifest %q", b.Root, b.Name, b.Manifest)
	}
	if !slices.Equal(b.Skills, []string{filepath.Join(root, "skills")}) || !slices.Equal(b.Commands, []string{filepath.Join(root, "commands")}) {
		t.Fatalf("skills %v commands %v", b.Skills, b.Commands)
	}
	groups := b.Hooks["PostToolUse"]
	if len(groups) != 1 {
		t.Fatalf("hooks %v", b.Hooks)
	}
	g := groups[0].(map[string]any)
	h := g["hooks"].([]any)[0].(map[string]any)
	if g["matcher"] != "Write|Edit" || h["command"] != root+"/scripts/format-code.sh" || h["timeout"] != 30.0 || h["type"] != "command" {
		t.Fatalf("hook group %v", g)
	}
	if len(b.Servers) != 2 {
		t.Fatalf("servers %+v", b.Servers)
	}
	api, db := b.Servers[0], b.Servers[1]
	if api.Name != "plugin-api" || api.Type != "http" || api.URL != "https://api.example.com/mcp" || api.Headers["Authorization"] != "Bearer t0k" {
		t.Fatalf("http server %+v", api)
	}
	wantDB := Server{Name: "plugin-database", File: ".mcp.json", Type: "stdio", Command: root + "/servers/db-server",
		Args: []string{"--config", root + "/config.json"}, Env: map[string]string{"DB_PATH": root + "/data", "DB_URL": "postgres://db"}}
	if !reflect.DeepEqual(db, wantDB) {
		t.Fatalf("stdio server\n got %+v\nwant %+v", db, wantDB)
	}
	if !slices.Equal(b.Vars, []string{"API_TOKEN", "DB_URL"}) && !slices.Equal(b.Vars, []string{"DB_URL", "API_TOKEN"}) {
		t.Fatalf("vars read %v; want DB_URL and API_TOKEN only", b.Vars)
	}
	if len(b.Agents) != 1 || b.Agents[0].Name != "security-reviewer" {
		t.Fatalf("agents %+v", b.Agents)
	}
	if b.Agents[0].SystemPrompt != "You are a security expert." || b.Agents[0].Description != "Reviews code for security vulnerabilities" {
		t.Fatalf("agent %+v; want the file's body as its system prompt", b.Agents[0])
	}
	if slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, "security-reviewer") }) {
		t.Fatalf("the agent, which names neither tools nor a model, has a note: %q", b.Notes)
	}
}

// TestManifestPathsReplaceTheDefaultFolders: a manifest that names
// commands, skills or agents paths is read instead of the default folders
// (Claude Code's reference: "replaces default"), while hooks/hooks.json is
// always read and manifest hooks add to it.
func TestManifestPathsReplaceTheDefaultFolders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".claude-plugin/plugin.json": `{"name": "p", "commands": ["./extra/deploy.md", "./more"], "skills": "./custom/skills/",
			"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo ${CLAUDE_PLUGIN_ROOT} $HOME"}]}]},
			"mcpServers": {"inline": {"command": "srv"}}}`,
		"commands/ignored.md":      "x",
		"extra/deploy.md":          "x",
		"more/":                    "",
		"custom/skills/a/SKILL.md": "---\nname: a\ndescription: a\n---\n",
		"hooks/hooks.json":         `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}`,
		".mcp.json":                `{"mcpServers": {"inline": {"command": "from-file"}, "file-only": {"command": "x"}}}`,
	})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	root := b.Root
	if !slices.Equal(b.Commands, []string{root + "/extra/deploy.md", root + "/more"}) {
		t.Fatalf("commands %v", b.Commands)
	}
	if !slices.Equal(b.Skills, []string{root + "/custom/skills"}) {
		t.Fatalf("skills %v", b.Skills)
	}
	stop := b.Hooks["Stop"]
	if len(stop) != 2 {
		t.Fatalf("Stop groups %v; want the file's and the manifest's", stop)
	}
	cmd := stop[1].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"]
	if cmd != "echo "+root+" $HOME" {
		t.Fatalf("inline hook command %q: only ${CLAUDE_PLUGIN_ROOT} is replaced, the rest is the shell's", cmd)
	}
	names := map[string]string{}
	for _, s := range b.Servers {
		names[s.Name] = s.Command
	}
	if names["inline"] != "srv" || names["file-only"] != "x" {
		t.Fatalf("servers %v: the manifest's server wins over .mcp.json's of the same name, others stay", names)
	}
}

func TestDefaultHooksFileNamedAgainIsReadOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".claude-plugin/plugin.json": `{"name": "p", "hooks": "./hooks/hooks.json"}`,
		"hooks/hooks.json":           `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}`,
	})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Hooks["Stop"]) != 1 {
		t.Fatalf("Stop groups %v; want one", b.Hooks["Stop"])
	}
	if !slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, "loads it once") }) {
		t.Fatalf("notes %q", b.Notes)
	}
}

func TestManifestDefectsNameFileAndField(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{"no name", `{"version": "1.0.0"}`, []string{".claude-plugin/plugin.json: name: missing"}},
		{"bad name", `{"name": "My Plugin"}`, []string{`.claude-plugin/plugin.json: name: "My Plugin" is not a plugin name`}},
		{"wrong types", `{"name": "p", "version": 1, "author": ["x"], "keywords": "k", "commands": 3}`, []string{
			"plugin.json: version: expected a string, got the number 1",
			"plugin.json: author: expected an object",
			"plugin.json: keywords: expected a list of strings",
			"plugin.json: commands: expected a path",
		}},
		{"not JSON", `{"name": "p",}`, []string{".claude-plugin/plugin.json: not valid JSON"}},
		{"absolute path", `{"name": "p", "skills": "/etc"}`, []string{`plugin.json: skills: "/etc" is absolute`}},
		{"no ./", `{"name": "p", "hooks": "hooks/other.json"}`, []string{`plugin.json: hooks: "hooks/other.json" must start with "./"`}},
		{"escape", `{"name": "p", "commands": ["./a", "./../outside"]}`, []string{`plugin.json: commands[1]: "./../outside" leaves the bundle root`}},
		{"missing path", `{"name": "p", "agents": "./nowhere"}`, []string{`plugin.json: agents: "./nowhere": no such file or directory`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, map[string]string{".claude-plugin/plugin.json": tc.manifest, "a/": ""})
			containsAll(t, mustProblems(t, dir, env()), tc.want...)
		})
	}
}

// TestASymlinkOutOfTheBundleIsRefused: the format's containment rule
// holds after symlinks are resolved, for a manifest path and for a
// default folder alike.
func TestASymlinkOutOfTheBundleIsRefused(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, map[string]string{"x/SKILL.md": "---\nname: x\ndescription: x\n---\n"})
	dir := t.TempDir()
	write(t, dir, map[string]string{".claude-plugin/plugin.json": `{"name": "p", "commands": "./cmds"}`})
	if err := os.Symlink(outside, filepath.Join(dir, "skills")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "cmds")); err != nil {
		t.Fatal(err)
	}
	containsAll(t, mustProblems(t, dir, env()),
		`skills: "./skills" resolves (through a symlink) to`,
		`plugin.json: commands: "./cmds" resolves (through a symlink) to`)
}

func TestUnsupportedPartsAreNotesNotErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".claude-plugin/plugin.json": `{"name": "p", "lspServers": "./.lsp.json", "outputStyles": "./styles/", "futureField": 1}`,
		".lsp.json":                  `{}`,
		"bin/tool":                   "",
		".mcp.json":                  `{"mcpServers": {"legacy": {"type": "sse", "url": "https://x/sse"}, "auth": {"type": "http", "url": "https://x", "oauth": {}}}}`,
		"hooks/hooks.json":           `{"hooks": {"PreToolUse": [{"matcher": "Bash", "priority": 1, "hooks": [{"type": "command", "command": "x", "async": true}, {"type": "command", "command": "y", "async": false}]}]}}`,
	})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Servers) != 0 {
		t.Fatalf("servers %+v; sse and oauth servers are not mounted", b.Servers)
	}
	containsAll(t, b.Notes,
		"plugin.json: lspServers: not mounted",
		"plugin.json: outputStyles: not mounted",
		"plugin.json: futureField: not a manifest field dsh knows; ignored",
		"./bin: not mounted",
		"mcpServers.legacy: not mounted: dsh's MCP client speaks stdio and streamable HTTP",
		"mcpServers.auth: not mounted: it sets oauth",
		"hooks.PreToolUse[0].hooks[0].async: ignored: the hook runs before the event goes on",
		"hooks.PreToolUse[0].priority: not a key of a matcher group dsh reads; ignored",
	)
	if slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, "hooks[1].async") }) {
		t.Fatalf("async: false, Claude Code's default, has a note: %q", b.Notes)
	}
}

func TestABundleWithoutManifestTakesItsFolderName(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "fmt-hooks")
	write(t, dir, map[string]string{"hooks/hooks.json": `{"hooks": {"Stop": []}}`})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "fmt-hooks" || b.Manifest != "" {
		t.Fatalf("name %q manifest %q", b.Name, b.Manifest)
	}
	empty := filepath.Join(parent, "empty")
	write(t, empty, map[string]string{"README.md": "x"})
	containsAll(t, mustProblems(t, empty, env()), "not a plugin bundle")
	containsAll(t, mustProblems(t, filepath.Join(parent, "missing"), env()), "cannot read the bundle")
}

func TestBadHooksFilesAreErrorsWithTheirPlace(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"hooks/hooks.json": `{"hooks": {"PreToolUse": [{"matcher": 5, "hooks": []}, {"hooks": [{"command": ["ls"]}]}], "Stop": {}}}`,
	})
	containsAll(t, mustProblems(t, dir, env()),
		"hooks/hooks.json: hooks.PreToolUse[0].matcher: expected a string, got the number 5",
		"hooks/hooks.json: hooks.PreToolUse[1].hooks[0].command: expected a string, got a list",
		"hooks/hooks.json: hooks.Stop: expected a list of matcher groups",
	)
}

// TestABundlesMCPFileMayMapServersDirectly: Claude Code's plugin docs also
// write a bundle's .mcp.json without the "mcpServers" wrapper.
func TestABundlesMCPFileMayMapServersDirectly(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{".mcp.json": `{"database-tools": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/db-server", "args": ["--config", "${CLAUDE_PLUGIN_ROOT}/config.json"]}}`})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Servers) != 1 || b.Servers[0].Name != "database-tools" || b.Servers[0].Command != b.Root+"/servers/db-server" {
		t.Fatalf("servers %+v", b.Servers)
	}
	write(t, dir, map[string]string{".mcp.json": `{"database-tools": {"command": "x", "args": 5}}`})
	containsAll(t, mustProblems(t, dir, env()), ".mcp.json: database-tools.args: expected a list of strings, got the number 5")
}

// TestTheOpenPluginsLayoutLoads: the Open Plugins specification puts the
// manifest in .plugin/ and names the root ${PLUGIN_ROOT}.
func TestTheOpenPluginsLayoutLoads(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".plugin/plugin.json": `{"name": "acme.tools", "version": "1.0.0"}`,
		".mcp.json":           `{"mcpServers": {"s": {"type": "stdio", "command": "${PLUGIN_ROOT}/bin/s", "args": ["${PLUGIN_ROOT}/c.json"], "cwd": "./data"}}}`,
		"hooks/hooks.json":    `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "${PLUGIN_ROOT}/check.sh"}]}]}}`,
	})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	cmd := b.Hooks["Stop"][0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"]
	if b.Name != "acme.tools" || b.Servers[0].Command != b.Root+"/bin/s" || b.Servers[0].Args[0] != b.Root+"/c.json" || b.Servers[0].Cwd != b.Root+"/data" || cmd != b.Root+"/check.sh" {
		t.Fatalf("name %q servers %+v hook %q", b.Name, b.Servers, cmd)
	}
}
