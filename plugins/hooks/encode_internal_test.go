package hooks

import "testing"

// TestPlainUnescapesAndKeepsOrderAndNumbers: the arguments a hook reads
// are the model's, key for key and digit for digit; only escapes change.
func TestPlainUnescapesAndKeepsOrderAndNumbers(t *testing.T) {
	cases := map[string]string{
		`{"z":"a \u003e b \u0026\u0026 c","a":[1.50,2e3,{"q":"\u003c"}],"n":null,"t":true}`: `{"z":"a > b && c","a":[1.50,2e3,{"q":"<"}],"n":null,"t":true}`,
		`{"s":"\u00e9\n\"x\""}`:  `{"s":"é\n\"x\""}`,
		`{"broken":"\u003e"`:     `{"broken":"\u003e"`,
		`{"a":"\u003e"} {"b":1}`: `{"a":"\u003e"} {"b":1}`,
		`{"plain":"no escapes"}`: `{"plain":"no escapes"}`,
	}
	for in, want := range cases {
		if got := string(plain([]byte(in))); got != want {
			t.Errorf("plain(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestBashOutputReadsHowTheCommandEnded covers the endings of dsh's bash
// result the tests with the real tool do not reach.
func TestBashOutputReadsHowTheCommandEnded(t *testing.T) {
	cases := []struct {
		in, stdout, stderr string
		interrupted        bool
	}{
		{"(no output)\nexit code: 0", "", "", false},
		{"a\nb\nkilled by signal terminated", "a\nb\n", "", false},
		{"partial\ncancelled: the command and every process it started were killed", "partial\n", "", true},
		{"timeout is 9000; give a number of seconds from 1 to 600", "", "timeout is 9000; give a number of seconds from 1 to 600", false},
	}
	for _, c := range cases {
		stdout, stderr, interrupted := bashOutput(c.in)
		if stdout != c.stdout || stderr != c.stderr || interrupted != c.interrupted {
			t.Errorf("bashOutput(%q) = %q, %q, %v", c.in, stdout, stderr, interrupted)
		}
	}
}

// BenchmarkHookInput is the cost of writing one PreToolUse input, with
// arguments the model sent escaped (plain has work to do).
func BenchmarkHookInput(b *testing.B) {
	args := []byte(`{"command":"make build \u0026\u0026 ./bin/app \u003e out.log 2\u003e\u00261","timeout":30}`)
	b.ReportAllocs()
	for b.Loop() {
		in := input{SessionID: "s", Cwd: "/w", HookEventName: PreToolUse, ToolName: "Bash", DshToolName: "bash",
			ToolInput: plain(forHook("bash", args, "/w")), ToolUseID: "c1"}
		if _, err := encode(in); err != nil {
			b.Fatal(err)
		}
	}
}
