package plugin_test

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are what a plugin must not link just by registering: the
// plugin-binary bridge (gRPC, go-plugin) and the config loader (koanf),
// and the host package that brings them.
var forbidden = []string{
	"google.golang.org/grpc",
	"github.com/hashicorp/go-plugin",
	"github.com/knadh/koanf",
	"github.com/dsh-go/dsh/host",
}

// TestPluginsLinkNoBridgeNorLoader holds the leaf rule with go list -deps:
// the registry itself, a plugin that only registers a tool (tools.clock)
// or a listener (tools.permission, the admission plugins), and every other
// built-in plugin.
func TestPluginsLinkNoBridgeNorLoader(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go list -deps and needs the go command on PATH: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`,
		"github.com/dsh-go/dsh/plugin", "github.com/dsh-go/dsh/plugins/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	checked := map[string]bool{}
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		checked[pkg] = true
		for _, f := range forbidden {
			for _, dep := range strings.Fields(deps) {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s; register through package plugin and keep the host, gRPC and koanf out of the plugin", pkg, dep)
					break
				}
			}
		}
	}
	for _, must := range []string{"github.com/dsh-go/dsh/plugin", "github.com/dsh-go/dsh/plugins/tools/clock", "github.com/dsh-go/dsh/plugins/tools/permission", "github.com/dsh-go/dsh/plugins/admission/maxpending"} {
		if !checked[must] {
			t.Errorf("go list did not report %s; the check would prove nothing", must)
		}
	}
}
