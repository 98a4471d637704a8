package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
)

const workspaceConfig = `
plugins:
  - use: llm.scripted
agents:
  - id: main
    provider: scripted
`

func TestWorkspaceDefaultsToTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse("ws.yaml", []byte(workspaceConfig), config.LoadOptions{Environ: []string{}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agents[0].Workspace != dir {
		t.Fatalf("workspace %q, want the working directory %q", cfg.Agents[0].Workspace, dir)
	}
	// Without Dir, the process's working directory.
	cfg, err = config.Parse("ws.yaml", []byte(workspaceConfig), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); cfg.Agents[0].Workspace != wd {
		t.Fatalf("workspace %q, want %q", cfg.Agents[0].Workspace, wd)
	}
}

// TestRelativeWorkspaceStartsFromTheWorkingDirectory: not from the config
// file's directory, which is elsewhere here.
func TestRelativeWorkspaceStartsFromTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "repo", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := workspaceConfig + "    workspace: ./repo/sub/../sub/\n    max_parallel_tools: 3\n"
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "elsewhere.yaml"), []byte(text), config.LoadOptions{Environ: []string{}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agents[0]
	if want := filepath.Join(dir, "repo", "sub"); a.Workspace != want || a.MaxParallelTools != 3 {
		t.Fatalf("workspace %q max_parallel_tools %d; want %q and 3", a.Workspace, a.MaxParallelTools, want)
	}
	// An absolute path is kept, cleaned.
	abs := filepath.Join(dir, "repo") + "//"
	cfg, err = config.Parse("ws.yaml", []byte(workspaceConfig), config.LoadOptions{Environ: []string{}, Dir: t.TempDir(), Sets: []string{"agents.main.workspace=" + abs}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "repo"); cfg.Agents[0].Workspace != want {
		t.Fatalf("workspace %q, want %q", cfg.Agents[0].Workspace, want)
	}
}

func TestBadWorkspacesAndCaps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, extra string
		sets        []string
		want        []string
	}{
		{"missing", "    workspace: nope\n", nil, []string{
			"ws.yaml:7: agents[0].workspace: workspace \"" + filepath.Join(dir, "nope") + "\" does not exist",
			"relative paths start from the working directory, " + dir}},
		{"a file", "    workspace: file.txt\n", nil, []string{
			"ws.yaml:7: agents[0].workspace: workspace \"" + filepath.Join(dir, "file.txt") + "\" is a file, not a directory"}},
		{"from a flag", "", []string{"agents.main.workspace=/no/such/dir"}, []string{
			"--set agents.main.workspace: agents[0].workspace: workspace \"/no/such/dir\" does not exist"}},
		{"negative cap", "    max_parallel_tools: -1\n", nil, []string{
			"ws.yaml:7: agents[0].max_parallel_tools: max_parallel_tools cannot be negative"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse("ws.yaml", []byte(workspaceConfig+c.extra), config.LoadOptions{Environ: []string{}, Dir: dir, Sets: c.sets})
			if !errs.HasCode(err, config.Invalid) {
				t.Fatalf("want CONFIG_INVALID, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
