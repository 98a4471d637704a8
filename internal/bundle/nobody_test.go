package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/internal/asnobody"
)

// asNobodyBundle names, in the child run as nobody, the bundle to load.
const asNobodyBundle = "DSH_BUNDLE_TEST_NOBODY"

// TestAPartDshCannotReadIsAnErrorNotASkip: root reads every part of a
// bundle whatever its modes; an ordinary user may not. A part that dsh's
// user cannot read must fail the load with the part and the uid named —
// never leave the part silently empty (a guard hook that does not run
// fails open). As root the test loads the bundle, then re-runs itself as
// uid 65534 with setpriv.
func TestAPartDshCannotReadIsAnErrorNotASkip(t *testing.T) {
	if dir := os.Getenv(asNobodyBundle); dir != "" {
		if os.Getuid() == 0 {
			t.Fatal("the child still runs as root")
		}
		containsAll(t, mustProblems(t, dir, env()),
			"hooks/hooks.json: cannot read: permission denied",
			fmt.Sprintf("plugin.json: skills: cannot read ./skills: permission denied; dsh runs as uid %d", os.Getuid()))
		return
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "guarded")
	write(t, dir, map[string]string{
		".claude-plugin/plugin.json": `{"name": "guarded"}`,
		"hooks/hooks.json":           `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]}}`,
		"skills/s/SKILL.md":          "---\nname: s\ndescription: s\n---\n",
	})
	// Readable folders, a closed hooks file and skills folder.
	for _, p := range []string{parent, dir, filepath.Join(dir, ".claude-plugin"), filepath.Join(dir, "hooks")} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(filepath.Join(dir, ".claude-plugin/plugin.json"), 0o644)
	os.Chmod(filepath.Join(dir, "hooks/hooks.json"), 0o600)
	os.Chmod(filepath.Join(dir, "skills"), 0o700)
	if os.Getuid() != 0 {
		// Ordinary users own the files: close them to this user too.
		os.Chmod(filepath.Join(dir, "hooks/hooks.json"), 0)
		os.Chmod(filepath.Join(dir, "skills"), 0)
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "skills"), 0o700) })
		t.Setenv(asNobodyBundle, dir)
		TestAPartDshCannotReadIsAnErrorNotASkip(t)
		return
	}
	b, err := Load(dir, env())
	if err != nil || len(b.Hooks["PreToolUse"]) != 1 || len(b.Skills) != 1 {
		t.Fatalf("as root: %+v, %v", b, err)
	}
	os.Chmod(filepath.Dir(parent), 0o755)
	asnobody.Run(t, "TestAPartDshCannotReadIsAnErrorNotASkip", asNobodyBundle+"="+dir)
}
