package bundle

import (
	"slices"
	"testing"
)

// TestAgentFilesReportWhatDshDoesNotApply: each agent file is read with its
// body as the system prompt; a tools: list, a model alias and a model id
// are each reported, and a file without front matter or of a name already
// taken is reported and left out.
func TestAgentFilesReportWhatDshDoesNotApply(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"agents/a-tools.md": "---\nname: lister\ndescription: lists\ntools: Read, Grep\n---\nYou list.\n",
		"agents/b-alias.md": "---\nname: aliased\ndescription: runs on sonnet\nmodel: sonnet\ntools:\n  - Read\n---\nYou alias.\n",
		"agents/c-id.md":    "---\nname: pinned\ndescription: runs on a model id\nmodel: deepseek-reasoner\n---\nYou pin.\n",
		"agents/d-bare.md":  "You have no front matter.\n",
		"agents/e-dup.md":   "---\nname: lister\ndescription: again\n---\nAgain.\n",
	})
	b, err := Load(dir, env())
	if err != nil {
		t.Fatal(err)
	}
	want := []Agent{
		{Name: "lister", Description: "lists", File: "./agents/a-tools.md", SystemPrompt: "You list.", Tools: []string{"Read", "Grep"}},
		{Name: "aliased", Description: "runs on sonnet", File: "./agents/b-alias.md", SystemPrompt: "You alias.", Tools: []string{"Read"}},
		{Name: "pinned", Description: "runs on a model id", File: "./agents/c-id.md", SystemPrompt: "You pin.", Model: "deepseek-reasoner"},
	}
	if !slices.EqualFunc(b.Agents, want, func(x, y Agent) bool {
		return x.Name == y.Name && x.Description == y.Description && x.File == y.File && x.SystemPrompt == y.SystemPrompt && x.Model == y.Model && slices.Equal(x.Tools, y.Tools)
	}) {
		t.Fatalf("agents\n got %+v\nwant %+v", b.Agents, want)
	}
	containsAll(t, b.Notes,
		`./agents/a-tools.md: agent "lister": tools: not applied`,
		`./agents/b-alias.md: agent "aliased": model "sonnet": not applied`,
		`./agents/c-id.md: agent "pinned": model "deepseek-reasoner" is run with the calling agent's provider`,
		`./agents/d-bare.md: agent "d-bare": not mounted: it has no front matter`,
		`./agents/e-dup.md: agent "lister": not mounted: another agent file of the bundle has that name`,
	)
}
