package lsp

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-hclog"
)

// Codes of the plugin.
const (
	// ServerMissing: a server's command is not installed. It is reported
	// once; dsh does not look for it again until the plugin is reloaded.
	ServerMissing errs.Code = "LSP_SERVER_MISSING"
	// ServerFailed: a server did not start, or exited, or a request to it
	// failed.
	ServerFailed errs.Code = "LSP_SERVER_FAILED"
	// Restarting: a server crashed and waits out its back-off before it
	// is started again.
	Restarting errs.Code = "LSP_SERVER_RESTARTING"
	// NoServer: no configured server handles the file.
	NoServer errs.Code = "LSP_NO_SERVER"
)

// servers holds the running servers, one per configured server and root.
type servers struct {
	cfg  Config
	log  hclog.Logger
	mu   sync.Mutex
	all  map[key]*slot
	gone bool
	// missing is each configured server found not installed, by name;
	// its first report is the only one.
	missing map[string]error
}

type key struct{ name, root string }

// slot is one server at one root across its restarts.
type slot struct {
	mu  sync.Mutex
	cur *client
	// crashes in a row, and when a start may next be tried.
	crashes int
	next    time.Time
	// starts counts the processes started, for tests and logs.
	starts int
}

func newServers(cfg Config, log hclog.Logger) *servers {
	return &servers{cfg: cfg, log: log, all: map[key]*slot{}, missing: map[string]error{}}
}

// rootOf is the nearest folder at or above file, and inside workspace,
// holding one of srv's root markers; workspace when there is none.
func rootOf(srv Server, workspace, file string) string {
	dir := filepath.Dir(file)
	for {
		for _, m := range srv.RootMarkers {
			if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
				return dir
			}
		}
		if dir == workspace || !strings.HasPrefix(dir, workspace+string(filepath.Separator)) {
			return workspace
		}
		dir = filepath.Dir(dir)
	}
}

// get returns the running server srv at root, starting it when it is not
// running. first is true when err reports a missing command for the first
// time: the caller tells the model once, and stays quiet after. A server
// in its restart back-off is waited for when wait is set and ctx leaves
// time for it; otherwise get answers Restarting at once (an edit does
// not wait for a crashed server).
func (s *servers) get(ctx stdctx.Context, srv Server, root string, wait bool) (c *client, first bool, err error) {
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return nil, false, errs.New(ServerFailed, "lsp: the plugin is shutting down")
	}
	if e, ok := s.missing[srv.Name]; ok {
		s.mu.Unlock()
		return nil, false, e
	}
	k := key{srv.Name, root}
	sl := s.all[k]
	if sl == nil {
		sl = &slot{}
		s.all[k] = sl
	}
	s.mu.Unlock()

	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur != nil && !sl.cur.dead() {
		return sl.cur, false, nil
	}
	if sl.cur != nil {
		// It crashed: restart after a back-off that grows with each
		// crash in a row, unless it had stayed up long enough.
		up := time.Since(sl.cur.started)
		tailText := sl.cur.stderr.String()
		sl.cur.close()
		sl.cur = nil
		if up >= s.cfg.RestartStable {
			sl.crashes = 0
		}
		wait := s.cfg.RestartBackoff << min(sl.crashes, 16)
		if wait > s.cfg.RestartBackoffMax || wait <= 0 {
			wait = s.cfg.RestartBackoffMax
		}
		sl.crashes++
		sl.next = time.Now().Add(wait)
		s.log.Warn("language server exited; restarting it", "server", srv.Name, "root", root, "in", wait, "stderr_tail", tailText)
	}
	if d := time.Until(sl.next); d > 0 {
		// A short back-off is waited out; a long one is an error the
		// caller can act on.
		if dl, ok := ctx.Deadline(); !wait || ok && time.Until(dl) < d {
			return nil, false, errs.New(Restarting, fmt.Sprintf("lsp: %s crashed and restarts in %s; try again then", srv.Name, d.Round(time.Millisecond)))
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
	}
	path, err := exec.LookPath(srv.Command)
	if err != nil {
		e := errs.Wrap(ServerMissing, err, fmt.Sprintf(
			"lsp: the language server %s (command %q) is not installed or not on PATH; install it (for gopls: go install golang.org/x/tools/gopls@latest) or fix servers[].command. dsh will not look for it again until the config is reloaded", srv.Name, srv.Command))
		s.mu.Lock()
		s.missing[srv.Name] = e
		s.mu.Unlock()
		s.log.Warn("language server not installed", "server", srv.Name, "command", srv.Command, "code", ServerMissing)
		return nil, true, e
	}
	sctx, cancel := stdctx.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	sl.starts++
	c, err = start(sctx, srv, path, root)
	if err != nil {
		sl.crashes++
		sl.next = time.Now().Add(min(s.cfg.RestartBackoff<<min(sl.crashes, 16), s.cfg.RestartBackoffMax))
		if errors.Is(err, stdctx.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("it did not finish initialize within start_timeout (%s): %w", s.cfg.StartTimeout, err)
		}
		return nil, false, errs.Wrap(ServerFailed, err, fmt.Sprintf("lsp: %s did not start in %s", srv.Name, root))
	}
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		c.close()
		return nil, false, errs.New(ServerFailed, "lsp: the plugin is shutting down")
	}
	sl.cur = c
	return c, false, nil
}

// running is the client of srv at root if it is up, without starting it.
func (s *servers) running(name, root string) *client {
	s.mu.Lock()
	sl := s.all[key{name, root}]
	s.mu.Unlock()
	if sl == nil {
		return nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil || sl.cur.dead() {
		return nil
	}
	return sl.cur
}

// closeAll stops every server; later gets fail.
func (s *servers) closeAll() {
	s.mu.Lock()
	s.gone = true
	slots := make([]*slot, 0, len(s.all))
	for _, sl := range s.all {
		slots = append(slots, sl)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, sl := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl.mu.Lock()
			defer sl.mu.Unlock()
			if sl.cur != nil {
				sl.cur.close()
				sl.cur = nil
			}
		}()
	}
	wg.Wait()
}
