package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/sdk"
)

// buildPlugin builds the Go main package pkg into the test's temp dir.
func buildPlugin(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// checkJSON runs dsh plugins check --json and decodes what it printed.
func checkJSON(t *testing.T, wantCode int, args ...string) checkReport {
	t.Helper()
	o := runDsh(t, "", append([]string{"plugins", "check", "--json"}, args...)...)
	if o.code != wantCode {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", o.code, wantCode, o.stdout, o.stderr)
	}
	var r checkReport
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatalf("--json printed no JSON object: %v\n%s", err, o.stdout)
	}
	return r
}

func TestPluginsCheckShowsWhatDshSees(t *testing.T) {
	adm := buildPlugin(t, "../../examples/plugin-admission")
	o := runDsh(t, "", "plugins", "check", "--plugin-config", `{"word": "password"}`, adm)
	for _, want := range []string{"plugin    no-secrets 1.0.0\n", "sdk       go/" + sdk.Version + "\n", "protocol  2 (this dsh speaks 2)\n",
		"  agent-controller/admission (waterfall)\n", "tools     0 tools\n", "ok: dsh can start this plugin\n"} {
		if o.code != 0 || !strings.Contains(o.stdout, want) {
			t.Fatalf("exit %d; stdout lacks %q:\n%s\nstderr: %s", o.code, want, o.stdout, o.stderr)
		}
	}

	r := checkJSON(t, 0, buildPlugin(t, "../../examples/plugin-tool"))
	if !r.OK || r.Name != "word-count" || r.SDK != "go/"+sdk.Version || r.Protocol != sdk.ProtocolVersion || len(r.Tools) != 1 {
		t.Fatalf("got %+v", r)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(r.Tools[0].Parameters, &schema); err != nil || schema.Properties["path"] == nil || !r.Tools[0].ParallelSafe {
		t.Fatalf("the tool's schema did not come through as JSON: %s (%v)", r.Tools[0].Parameters, err)
	}
}

func TestPluginsCheckSaysWhyAPluginWouldNotStart(t *testing.T) {
	cases := []struct {
		name         string
		args         []string
		code, reason string
		message      string
	}{
		{"not a plugin", []string{"/bin/true"}, "PLUGIN_START_FAILED", "", "exited without a handshake"},
		{"missing", []string{"/nonexistent/plugin"}, "PLUGIN_START_FAILED", "", "missing or not executable"},
		{"timed out", []string{"--timeout", "500ms", "/bin/sh", "-c", "sleep 30"}, "PLUGIN_TIMEOUT", "host/plugin-start-timeout", "hung in the handshake"},
		{"config rejected", []string{"--plugin-config", `{"word": 5}`, "BUILD:../../examples/plugin-admission"}, "PLUGIN_ERROR", "", "rejected its config"},
		{"a seam dsh cannot mount", []string{"BUILD:./testdata/oddplugin"}, "PLUGIN_PROTOCOL", "", `listens to "no/such-event"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string(nil), c.args...)
			for i, a := range args {
				if pkg, ok := strings.CutPrefix(a, "BUILD:"); ok {
					args[i] = buildPlugin(t, pkg)
				}
			}
			r := checkJSON(t, 1, args...)
			if r.OK || r.Error == nil || string(r.Error.Code) != c.code || r.Error.Reason != c.reason || !strings.Contains(r.Error.Error(), c.message) {
				t.Fatalf("got %+v (error %v), want %s (%s) saying %q", r, r.Error, c.code, c.reason, c.message)
			}
			// Without --json the same error goes to stderr with exit 1.
			o := runDsh(t, "", append([]string{"plugins", "check"}, args...)...)
			if o.code != 1 || !strings.Contains(o.stderr, c.code) || !strings.Contains(o.stderr, c.message) {
				t.Fatalf("exit %d, stderr %q; want 1 and %s", o.code, o.stderr, c.code)
			}
		})
	}
}

func TestPluginsCheckUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--plugin-config", "[1]", "/bin/true"}, {"--env", "NOEQUALS", "/bin/true"}} {
		if o := runDsh(t, "", append([]string{"plugins", "check"}, args...)...); o.code != 2 {
			t.Fatalf("%v: exit %d, want 2 (usage)\n%s", args, o.code, o.stderr)
		}
	}
}

func TestPluginsCheckPython(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf, cryptography").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have python3-grpcio, python3-protobuf and python3-cryptography (.ci/run installs them): %s", out)
		}
		t.Skipf("python3 lacks the Python SDK's modules: %s", out)
	}
	sdkDir, err := filepath.Abs("../../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	r := checkJSON(t, 0, "--python", python, "--env", "PYTHONPATH="+sdkDir, "../../examples/python-tool/dsh_file_stats.py")
	if !r.OK || r.Exec != python || len(r.Args) != 1 || !strings.HasSuffix(r.Args[0], "/examples/python-tool/dsh_file_stats.py") || len(r.Tools) == 0 ||
		!strings.HasPrefix(r.SDK, "python/") {
		t.Fatalf("got %+v", r)
	}
}

// The SDK is a module of its own and copies the names of the variables
// dsh passes a plugin; they must stay dsh's.
func TestSDKEnvNamesAreDsh(t *testing.T) {
	if sdk.MagicCookieEnv != childproc.MagicCookieEnv || sdk.HostFDEnv != childproc.HostFDEnv {
		t.Fatalf("sdk names %s and %s; dsh sets %s and %s", sdk.MagicCookieEnv, sdk.HostFDEnv, childproc.MagicCookieEnv, childproc.HostFDEnv)
	}
}
