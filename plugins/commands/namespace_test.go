package commands_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// TestANamespacedEntryAnswersToBothNames: an entry's namespace goes before
// its files' own, as Claude Code names a plugin's commands; the bare name
// stays the first entry's, and the shadowed command is listed and reached
// under its namespaced name.
func TestANamespacedEntryAnswersToBothNames(t *testing.T) {
	ws, _ := docsFolders(t)
	kit := t.TempDir()
	writeFile(t, filepath.Join(kit, "deploy.md"), "Deploy to $1.\n")
	writeFile(t, filepath.Join(kit, "optimize.md"), "the kit's optimize\n")
	writeFile(t, filepath.Join(kit, "infra", "plan.md"), "Plan the infrastructure.\n")
	e := newEnv(t)
	e.apply(e.root, commands.Plugin, commands.Config{}.Defaults())
	e.apply(e.root, commands.Plugin, commands.Config{Paths: []string{kit}, Namespace: "kit"})
	a := e.create("main", ws)
	for text, want := range map[string]string{
		"/kit:deploy prod": "Deploy to prod.",
		"/deploy prod":     "Deploy to prod.",
		"/kit:optimize":    "the kit's optimize",
		"/optimize":        "Analyze this code",
		"/kit:infra:plan":  "Plan the infrastructure.",
		"/plan":            "Plan the infrastructure.",
	} {
		got, err := e.prompt(a, text, agentcontroller.SourceUser)
		if err != nil || !strings.Contains(got.Content, want) {
			t.Errorf("%s: %q, %v; want %q", text, got.Content, err, want)
		}
	}
	var names []string
	for _, c := range commands.List(t.Context(), a) {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); !strings.HasSuffix(got, " deploy plan kit:optimize") && !strings.HasSuffix(got, " deploy kit:optimize plan") {
		t.Errorf("List: %s", got)
	}
	if err := (commands.Config{Paths: []string{kit}, Namespace: "my kit"}).Validate(); err == nil || !strings.Contains(err.Error(), `namespace "my kit"`) {
		t.Errorf("a namespace with a space: %v", err)
	}
}
