package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/childproc"
)

// runDshEnv runs the built dsh with env added to the test's environment.
func runDshEnv(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(dshBin, args...)
	cmd.Env = append(append(os.Environ(), "DSH_CONFIG="), env...)
	var o outcome
	out, err := cmd.Output()
	o.stdout = string(out)
	if ee, ok := err.(*exec.ExitError); ok {
		o.code, o.stderr = ee.ExitCode(), string(ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	return o
}

// A dsh started by one of dsh's own children inherits the variables dsh
// sets there; it must start as if they were not set.
func TestNestedDshIgnoresReservedVariables(t *testing.T) {
	cfg := writeConfig(t, "        - text: nested\n", "")
	var env []string
	for _, name := range childproc.ReservedEnv {
		env = append(env, name+"=7")
	}
	o := runDshEnv(t, env, "run", "--config", cfg, "-p", "x")
	if o.code != 0 || o.stdout != "nested\n" {
		t.Fatalf("dsh run with %v: exit %d, stdout %q, stderr %q", env, o.code, o.stdout, o.stderr)
	}
	o = runDshEnv(t, env, "config", "check", "--config", cfg)
	if o.code != 0 {
		t.Fatalf("dsh config check with %v: exit %d, stderr %q", env, o.code, o.stderr)
	}
}

// --ignore-env and ignore_environment: true stop a DSH_ variable from
// adding a plugin, and --ignore-env stops DSH_CONFIG from picking the file.
func TestIgnoreEnvironment(t *testing.T) {
	cfg := writeConfig(t, "        - text: plain\n", "")
	// The override replaces the plugin list (it could as well hold an
	// exec: entry); applied, the model answers "from-env".
	bad := []string{"DSH_PLUGINS=[{use: llm.scripted, config: {replies: [{text: from-env}]}}]"}
	if o := runDshEnv(t, bad, "run", "--config", cfg, "-p", "x"); o.stdout != "from-env\n" {
		t.Fatalf("the DSH_PLUGINS override was not applied (exit %d, %q, %q): the test proves nothing", o.code, o.stdout, o.stderr)
	}
	o := runDshEnv(t, bad, "run", "--ignore-env", "--config", cfg, "-p", "x")
	if o.code != 0 || o.stdout != "plain\n" {
		t.Fatalf("--ignore-env: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	strict := filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(strict, append([]byte("ignore_environment: true\n"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	// Neither the override nor a DSH_ variable that would switch the key
	// back on reaches the config.
	env := append(bad, "DSH_IGNORE_ENVIRONMENT=false")
	if o := runDshEnv(t, env, "run", "--config", strict, "-p", "x"); o.code != 0 || o.stdout != "plain\n" {
		t.Fatalf("ignore_environment: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	// DSH_CONFIG names a file; with --ignore-env it is ./config.yaml.
	dir := t.TempDir()
	cmd := exec.Command(dshBin, "config", "check", "--ignore-env")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DSH_CONFIG="+cfg)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"config.yaml" not found`) {
		t.Fatalf("--ignore-env read DSH_CONFIG: %v %s", err, out)
	}
}
