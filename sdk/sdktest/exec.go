package sdktest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// startTimeout bounds the handshake of a child, like dsh's default
// start_timeout.
const startTimeout = 10 * time.Second

// Exec starts the program path with args as a child process the way dsh
// starts an exec: entry — go-plugin's handshake on its stdout, gRPC with
// AutoMTLS — then describes and configures it, and stops it when the test
// ends. For a Python plugin, path is the interpreter and the script is the
// first argument. What the child logs or prints shows in the test's log.
func Exec(t testing.TB, path string, args []string, opts ...Option) *Host {
	t.Helper()
	o := collect(opts)
	out := &testLog{t: t}
	t.Cleanup(out.stop)
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), o.env...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.VersionedPlugins(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     startTimeout,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: filepath.Base(path), Output: out, Level: hclog.Debug}),
		SyncStdout:       out,
		SyncStderr:       out,
	})
	// Registered after out.stop, so it runs first: the child's last words
	// still reach the test's log.
	t.Cleanup(client.Kill)
	conn, err := client.Client()
	if err != nil {
		t.Fatalf("sdktest: %v", errs.Wrap(StartFailed, err, fmt.Sprintf(
			"%s did not complete the plugin handshake; a Go plugin calls sdk.Serve, and writes nothing to stdout before it", path)))
	}
	raw, err := conn.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatalf("sdktest: %v", errs.Wrap(StartFailed, err, path+" does not serve the dsh plugin protocol"))
	}
	h := &Host{rpc: raw.(pluginv1.PluginClient), protocol: client.NegotiatedVersion()}
	if err := h.setUp(t, o); err != nil {
		t.Fatalf("sdktest: %s: %v", path, err)
	}
	return h
}

// Build compiles the Go main package pkg (a directory, as go build takes
// it: "." for the test's own) into the test's temporary directory and
// returns the binary's path, for Exec.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sdktest: %v", errs.Wrap(StartFailed, err, fmt.Sprintf("go build %s failed:\n%s", pkg, out)))
	}
	return bin
}

// testLog writes a child's output into the test's log, line by line,
// until the test ends; after that it drops it, since a test's log cannot
// be written once the test finished.
type testLog struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
	buf  bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // no newline yet: keep for the next write
			break
		}
		l.t.Log(strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rest := l.buf.String(); rest != "" {
		l.t.Log(rest)
	}
	l.done = true
}
