package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A reader that stops early (head -1, head -c 1) is a clean end for dsh:
// it does not die of SIGPIPE, the turn runs to its end with its tools, the
// session holds all of it, and the exit code is the turn's.
func TestStdoutClosedEarly(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep func(*bufio.Reader) error // what the reader takes before it closes
		args []string
	}{
		{"json, first line", func(r *bufio.Reader) error { _, err := r.ReadString('\n'); return err }, []string{"--json"}},
		{"json, one byte", func(r *bufio.Reader) error { _, err := r.ReadByte(); return err }, []string{"--json"}},
		{"text, one byte", func(r *bufio.Reader) error { _, err := r.ReadByte(); return err }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sessions")
			cfg := writeConfig(t, "        - text: \"first \"\n          tool_calls: [{name: clock}]\n        - text: \"the whole answer\"\n      delay: 100ms\n",
				fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir))
			cmd := exec.Command(dshBin, append([]string{"run", "--config", cfg, "--session", "piped", "-p", "what time is it"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "DSH_CONFIG=")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			if err := tc.keep(bufio.NewReader(pr)); err != nil {
				t.Fatalf("nothing on stdout: %v", err)
			}
			pr.Close() // the reader is gone: the next write meets a closed pipe
			err = cmd.Wait()
			if err != nil {
				t.Fatalf("dsh ended with %v (a closed stdout must not kill it nor fail the run); stderr:\n%s", err, stderr.String())
			}
			log, err := os.ReadFile(filepath.Join(dir, "piped.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"type":"tool/result"`, `the whole answer`, `"reason":"completed"`} {
				if !bytes.Contains(log, []byte(want)) {
					t.Fatalf("the session lacks %s:\n%s", want, log)
				}
			}
			if !strings.Contains(stderr.String(), "stdout was closed") {
				t.Fatalf("stderr does not say that output stopped:\n%s", stderr.String())
			}
		})
	}
}
