package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestTheHooksOfOneEventRunInParallel: each hook waits for the other's
// mark before it answers, which only both running at once can satisfy
// (run one after the other, the first would time out and decide nothing).
func TestTheHooksOfOneEventRunInParallel(t *testing.T) {
	r := newRig(t)
	a, b := filepath.Join(r.dir, "a"), filepath.Join(r.dir, "b")
	waitThenDeny := func(mine, theirs string) string {
		return r.script(filepath.Base(mine)+".sh", `touch `+mine+`
i=0; while [ ! -e `+theirs+` ]; do i=$((i+1)); [ $i -gt 400 ] && exit 0; sleep 0.01; done
echo "`+filepath.Base(mine)+` saw the other" >&2; exit 2`)
	}
	r.preToolUse(hook("", waitThenDeny(a, b), 10), hook("", waitThenDeny(b, a), 10))
	v := r.approve("main", "bash", `{"command":"make"}`)
	if v.Decision != tools.Deny || v.Reason != "a saw the other; b saw the other" {
		t.Fatalf("got %+v", v)
	}
}

// TestTheSameCommandRunsOnce, as in Claude Code: two matcher groups that
// both match and name the same command run it once.
func TestTheSameCommandRunsOnce(t *testing.T) {
	r := newRig(t)
	count := filepath.Join(r.dir, "count")
	cmd := r.script("count.sh", `echo x >> `+count)
	r.preToolUse(hook("Bash", cmd, 0), hook(".*", cmd, 0))
	r.approve("main", "bash", `{"command":"make"}`)
	data, _ := os.ReadFile(count)
	if n := strings.Count(string(data), "x"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// TestUserPromptSubmitContinueFalseRefuses and a plain-text hook that
// only adds context do not change the message.
func TestUserPromptSubmitContinueFalseRefuses(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"UserPromptSubmit": []any{hook("", r.script("p.sh", `grep -q stop && echo '{"continue":false,"stopReason":"closed for today"}'; true`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "please stop"); err == nil || !strings.Contains(err.Error(), "closed for today") {
		t.Fatalf("got %v", err)
	}
	if err := r.prompt("main", "hello"); err != nil {
		t.Fatal(err)
	}
}
