package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// No runnable ACP conformance suite is published (the npm registry has the
// protocol's TypeScript SDK, @agentclientprotocol/sdk, and no test-suite
// package), so testdata/acp-conformance/run.mjs is its equivalent: the
// official SDK's client drives the built dsh acp through initialize,
// session/new, prompt, cancel, close, list, load and resume, and through
// whatever initialize advertises; the SDK checks each answer against the
// protocol's schema.

// conformanceDir installs the pinned SDK once per lockfile, outside the
// source tree, and returns the directory to run the driver in.
func conformanceDir(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "acp-conformance")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(os.TempDir(), "dsh-acp-conformance-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("node is installed but npm is not; install it (apt-get install -y npm) to run the ACP conformance check")
		}
		// Installed in a directory of its own, then renamed: two test
		// runs at once never see half an install.
		tmp, err := os.MkdirTemp(os.TempDir(), "dsh-acp-conformance-install-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		for _, f := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci of the ACP SDK: %v\n%s", err, out)
		}
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(dir, "node_modules")); serr != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

type conformanceCheck struct {
	Check, Status, Detail string
}

// runConformance runs the driver against dsh acp with cfg and returns its
// checks.
func runConformance(t *testing.T, dir, cfg string) []conformanceCheck {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "acp-conformance", "run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Beside node_modules, where its import resolves; one name per run.
	driver := filepath.Join(dir, fmt.Sprintf("run-%d-%d.mjs", os.Getpid(), time.Now().UnixNano()))
	if err := os.WriteFile(driver, script, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(driver)
	work := t.TempDir()
	cmd := exec.Command("node", driver, dshBin, cfg, work)
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the conformance driver did not finish\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	var out []conformanceCheck
	for _, line := range strings.Split(stdout.String(), "\n") {
		var c conformanceCheck
		if json.Unmarshal([]byte(line), &c) == nil && c.Check != "" {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the driver reported nothing\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	for _, c := range out {
		if c.Status == "fail" {
			t.Errorf("%s failed: %s", c.Check, c.Detail)
		}
	}
	if t.Failed() {
		t.Logf("dsh's stderr: %s", stderr.String())
	}
	return out
}

func TestACPConformance(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; the ACP conformance check needs it (apt-get install -y nodejs npm)")
	}
	dir := conformanceDir(t)

	// The shipped config has no session store and a fast model: what it
	// does not advertise is skipped, and nothing advertised fails.
	t.Run("shipped config", func(t *testing.T) {
		shipped, err := filepath.Abs(filepath.Join("..", "..", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range runConformance(t, dir, shipped) {
			if c.Status == "skip" && !strings.Contains(c.Detail, "not advertised") && !strings.Contains(c.Detail, "too fast to cancel") {
				t.Errorf("%s skipped: %s", c.Check, c.Detail)
			}
		}
	})

	// With a store and a model slow enough to cancel, nothing is skipped.
	t.Run("store and slow model", func(t *testing.T) {
		store := t.TempDir()
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		yaml := "plugins:\n  - use: llm.scripted\n    config: {delay: 150ms}\n  - use: session.jsonl\n    config: {dir: " + store + "}\n" +
			"  - use: tools.clock\nagents:\n  - id: main\n    provider: scripted\n"
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		checks := runConformance(t, dir, cfg)
		for _, c := range checks {
			if c.Status == "skip" {
				t.Errorf("%s skipped: %s", c.Check, c.Detail)
			}
		}
		if len(checks) < 12 {
			t.Errorf("only %d checks ran", len(checks))
		}
	})
}
