package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"sync"

	"github.com/dsh-go/dsh/errs"
)

// trials caches what a real sandboxed start showed, once per process: the
// kernel and the container do not change under dsh.
var trials struct {
	once                  sync.Once
	namespaces, idmap     bool
	nsReason, idmapReason string
}

// probeNamespaces fills st's namespace fields by starting a trivial
// program in the sandbox for real: a container may allow creating a user
// namespace yet refuse mounting /proc in it, and only the whole path
// says so.
func probeNamespaces(st *Status) {
	trials.once.Do(func() {
		err := trial(*st, 0)
		if err == nil {
			trials.namespaces, trials.idmap = true, st.Root
			return
		}
		if st.Root {
			if err2 := trial(*st, SameUID); err2 == nil {
				trials.namespaces, trials.idmapReason = true, msg(err)
				return
			}
		}
		trials.nsReason = msg(err)
		trials.idmapReason = "no user namespaces"
	})
	st.Namespaces, st.NSReason = trials.namespaces, trials.nsReason
	st.Idmap, st.IdmapReason = trials.idmap, trials.idmapReason
}

// trial enters a sandbox with a fresh temp dir writable and exits there,
// without running a program. It leaves out the network namespace, the
// slowest part to create: a kernel that creates a user namespace creates
// that one too, and if not, commands fail to start and say so.
func trial(st Status, weak Weaken) error {
	dir, err := os.MkdirTemp("", "dsh-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(self)
	e, err := attach(cmd, Rules{Writable: []string{dir}, Network: NetworkOn}, st, weak)
	if err != nil {
		return err
	}
	err = cmd.Start()
	e.Started()
	if err != nil {
		e.release()
		return err
	}
	waitErr := cmd.Wait()
	if err := e.Err(); err != nil {
		return err
	}
	return waitErr
}

// msg is an error's message without its code.
func msg(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
