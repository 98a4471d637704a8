package execplugin_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/hashicorp/go-hclog"
)

// TestARelativeExecPathStartsFromTheConfigFile: a config beside its
// plugins works from any working directory (the test runs in
// host/execplugin, the config lives elsewhere), and the binary dsh runs
// is the one it protects from the model.
func TestARelativeExecPathStartsFromTheConfigFile(t *testing.T) {
	bin, _ := binaries(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "plugins", "guard")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "dsh.yaml")
	yaml := execConfig("./plugins/guard", `{refuse_word: spam}`, "")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); strings.HasPrefix(wd, dir) {
		t.Fatalf("the test must run outside the config's folder: %s", wd)
	}
	cfg, err := config.Load(config.LoadOptions{Path: file, Environ: []string{}})
	if err != nil {
		t.Fatalf("a path relative to the config file: %v", err)
	}
	logs := &logBuffer{}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	if _, err := send(h, stdctx.Background(), "main", "buy spam"); !agentcontroller.IsRejected(err) {
		t.Fatalf("the plugin beside the config must run and refuse: %v\n%s", err, logs.String())
	}
	l, err := protect.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := l.Match(dir, exe); !ok || !strings.Contains(e.What, "plugin binary") {
		t.Fatalf("%s must be protected as the plugin binary dsh runs: %+v %v", exe, e, ok)
	}
	if tree := host.Describe(cfg); !strings.Contains(tree, fmt.Sprintf("(exec %s)", exe)) {
		t.Fatalf("dsh config check must show the binary it resolved:\n%s", tree)
	}
}
