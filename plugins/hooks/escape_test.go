package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestAGuardThatGrepsItsRawInputSeesShellOperators: a guard written for
// Claude Code greps the JSON on its stdin for "> /etc/" and "&&"; dsh
// must write them raw, as Claude Code does, or the guard fails open.
// Arguments the model sent with those characters escaped (\u003e) reach
// the hook raw too.
func TestAGuardThatGrepsItsRawInputSeesShellOperators(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "stdin")
	guard := r.script("guard.sh", `input=$(cat)
printf '%s\n' "$input" >> `+seen+`
if printf '%s' "$input" | grep -q '> /etc/'; then echo "writes under /etc" >&2; exit 2; fi
if printf '%s' "$input" | grep -q '&&'; then echo "one command at a time" >&2; exit 2; fi
if printf '%s' "$input" | grep -q '<<'; then echo "no here-documents" >&2; exit 2; fi
exit 0`)
	r.preToolUse(hook("Bash", guard, 0))
	cases := map[string]string{
		`{"command":"echo x > /etc/motd"}`:          "writes under /etc",
		`{"command":"make && make install"}`:        "one command at a time",
		`{"command":"echo x \u003e /etc/motd"}`:     "writes under /etc",
		`{"command":"true \u0026\u0026 rm -f out"}`: "one command at a time",
		`{"command":"cat \u003c\u003cEOF\nx\nEOF"}`: "no here-documents",
	}
	for args, want := range cases {
		if v := r.approve("main", "bash", args); v.Decision != tools.Deny || v.Reason != want {
			t.Errorf("%s: the guard did not see its operator: %+v", args, v)
		}
	}
	data, _ := os.ReadFile(seen)
	for _, esc := range []string{`\u003e`, `\u003c`, `\u0026`} {
		if strings.Contains(string(data), esc) {
			t.Errorf("the hook's stdin holds %s:\n%s", esc, data)
		}
	}
}

// TestAPromptGuardSeesItsRawText: UserPromptSubmit's stdin is written
// the same way: a guard grepping for "<script>" or "&&" refuses the
// message.
func TestAPromptGuardSeesItsRawText(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"UserPromptSubmit": []any{hook("", r.script("guard.sh", `grep -q '<script>' && { echo "no markup in prompts" >&2; exit 2; }; exit 0`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	err := r.prompt("main", `render <script>alert(1)</script> & go`)
	if err == nil || !strings.Contains(err.Error(), "no markup in prompts") {
		t.Fatalf("the guard did not refuse the prompt: %v", err)
	}
}
