package agentsmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiscoverStopsAtHome: a repository above the user's home is not the
// project of a workspace inside the home; outside the home the search goes
// up to the filesystem root.
func TestDiscoverStopsAtHome(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	ws := filepath.Join(home, "proj", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := discover(ws, []string{"AGENTS.md"}, home)
	if err != nil || l.top != ws || len(l.cands) != 1 || l.cands[0].rel != "AGENTS.md" {
		t.Fatalf("inside home: %+v %v", l, err)
	}
	l, err = discover(ws, []string{"AGENTS.md"}, "/nonexistent-home")
	if err != nil || l.top != tmp || len(l.cands) != 4 || l.cands[0].rel != "AGENTS.md" || l.cands[3].rel != "home/proj/ws/AGENTS.md" {
		t.Fatalf("outside home: %+v %v", l, err)
	}
	// The home itself may be the repository (a dotfiles repository).
	if err := os.WriteFile(filepath.Join(home, ".git"), []byte("gitdir: elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = discover(ws, []string{"AGENTS.md"}, home)
	if err != nil || l.top != home || len(l.cands) != 3 {
		t.Fatalf("home as repository: %+v %v", l, err)
	}
}
