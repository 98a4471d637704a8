package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverModule is the nats-server module in go.mod; its binary is built
// from the module cache, so tests run the same server the embedded
// helpers do, as separate processes a test can kill.
const serverModule = "github.com/nats-io/nats-server/v2"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary builds the nats-server binary once per machine and module
// version (kept under the temporary directory between test runs) and
// returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		version := "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == serverModule {
					version = d.Version
				}
			}
		}
		dir := filepath.Join(os.TempDir(), "dsh-natstest", version)
		binPath = filepath.Join(dir, "nats-server")
		if _, err := os.Stat(binPath); err == nil {
			return
		}
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		// Built beside, then renamed: tests of several packages may build
		// at once, and none may run a half-written file.
		tmp := fmt.Sprintf("%s.%d", binPath, os.Getpid())
		out, err := exec.Command("go", "build", "-o", tmp, serverModule).CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build %s: %v\n%s", serverModule, err, out)
			return
		}
		binErr = os.Rename(tmp, binPath)
	})
	if binErr != nil {
		t.Fatalf("natstest: cannot build nats-server: %v", binErr)
	}
	return binPath
}

// Procs is a JetStream cluster of nats-server processes on loopback,
// started as docs/cluster.md starts one.
type Procs struct {
	t     testing.TB
	ports []int // client port of node i at 2i, cluster port at 2i+1
	dir   string
	mu    sync.Mutex
	cmds  []*exec.Cmd
}

// StartProcs starts n nats-server processes forming one JetStream
// cluster and returns once each accepts clients — not waiting for a meta
// leader, as an operator's start script does not. They are killed when
// the test ends.
func StartProcs(t testing.TB, n int) *Procs {
	t.Helper()
	bin := Binary(t)
	p := &Procs{t: t, ports: freePorts(t, 2*n), dir: t.TempDir(), cmds: make([]*exec.Cmd, n)}
	t.Cleanup(p.stop)
	var routes []string
	for i := range n {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p.ports[2*i+1]))
	}
	for i := range n {
		cmd := exec.Command(bin, "-js", "-n", fmt.Sprintf("nats%d", i), "-sd", filepath.Join(p.dir, strconv.Itoa(i)),
			"-a", "127.0.0.1", "-p", strconv.Itoa(p.ports[2*i]),
			"--cluster_name", "dsh", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		logf, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("nats%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("natstest: cannot start nats-server %d: %v", i, err)
		}
		p.cmds[i] = cmd
	}
	for i := range n {
		p.await(i)
	}
	return p
}

func (p *Procs) await(i int) {
	deadline := time.Now().Add(ReadyTimeout)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.ports[2*i]), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("natstest: nats-server %d does not accept clients after %s: %v", i, ReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logs returns the end of every node's log, for a failing test's message.
func (p *Procs) Logs() string {
	var b strings.Builder
	for i := range p.cmds {
		data, _ := os.ReadFile(filepath.Join(p.dir, fmt.Sprintf("nats%d.log", i)))
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- nats-server %d:\n%s\n", i, data)
	}
	return b.String()
}

// URLs lists every node's client URL, comma-separated.
func (p *Procs) URLs() string {
	var urls []string
	for i := 0; i < len(p.ports); i += 2 {
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(p.ports[i]))
	}
	return strings.Join(urls, ",")
}

func (p *Procs) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cmd := range p.cmds {
		if cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
}
