package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/asnobody"
)

// asNobodyDir names, in the child run as nobody, the folder to scan.
const asNobodyDir = "DSH_SKILLS_TEST_NOBODY_DIR"

// TestUnreadableSkillAsRootAndAsNobody: a SKILL.md its owner keeps to
// itself (mode 000, owned by root) is read by root, which reads any file,
// and left out for an ordinary user with SKILL_UNREADABLE naming the file,
// while the skills beside it still load; a skills folder the user cannot
// list is reported, not taken for an empty one. As root the test re-runs itself
// as uid 65534 with setpriv.
func TestUnreadableSkillAsRootAndAsNobody(t *testing.T) {
	if dir := os.Getenv(asNobodyDir); dir != "" {
		if os.Getuid() == 0 {
			t.Fatal("the child still runs as root")
		}
		locked := filepath.Join(filepath.Dir(dir), "locked")
		list, problems := scan([]string{dir, locked})
		if len(list) != 1 || list[0].Name != "open" || len(problems) != 2 ||
			!errs.HasCode(problems[0].Err, Unreadable) || !strings.Contains(problems[0].Err.Error(), filepath.Join(dir, "closed", "SKILL.md")+": cannot be read") ||
			!errs.HasCode(problems[1].Err, Unreadable) || !strings.Contains(problems[1].Err.Error(), locked+": the skills folder cannot be listed") {
			t.Fatalf("as uid %d: %+v %+v", os.Getuid(), list, problems)
		}
		return
	}
	root := t.TempDir()
	dir := filepath.Join(root, "skills")
	for _, n := range []string{"open", "closed"} {
		p := filepath.Join(dir, n, "SKILL.md")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("---\nname: "+n+"\ndescription: d\n---\nbody\n"), 0o644)
	}
	os.Chmod(filepath.Join(dir, "closed", "SKILL.md"), 0)
	// A folder only its owner may list.
	os.MkdirAll(filepath.Join(root, "locked", "x"), 0o700)
	os.Chmod(filepath.Join(root, "locked"), 0o700)
	if os.Getuid() != 0 {
		t.Setenv(asNobodyDir, dir)
		TestUnreadableSkillAsRootAndAsNobody(t)
		return
	}
	if list, problems := scan([]string{dir}); len(list) != 2 || len(problems) != 0 {
		t.Fatalf("as root: %+v %+v", list, problems)
	}
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755)
	asnobody.Run(t, "TestUnreadableSkillAsRootAndAsNobody", asNobodyDir+"="+dir)
}
