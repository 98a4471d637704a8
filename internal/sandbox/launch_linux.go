package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// self is dsh's executable as the kernel knows it: it still works when the
// file was replaced or removed since dsh started (an upgrade).
const self = "/proc/self/exe"

// Entry follows one child into the sandbox.
type Entry struct {
	report, childEnd *os.File
}

// Attach rewrites cmd, prepared but not started, so that the process
// enters the sandbox of r at the ABI of st and then runs cmd's program
// with cmd's arguments, environment, directory and files. It refuses rules
// st cannot enforce (see Status.Check): it never weakens them.
//
// After cmd.Start, call Started; after the process exited, Err says
// whether it ever ran the program.
func Attach(cmd *exec.Cmd, r Rules, st Status) (*Entry, error) {
	if err := st.Check(r); err != nil {
		return nil, err
	}
	if cmd.Process != nil {
		return nil, errs.New(errs.InvalidArgument, "sandbox.Attach: the command has already started")
	}
	path := cmd.Path
	if !filepath.IsAbs(path) {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, "sandbox.Attach: cannot find "+path)
		}
		path = p
	}
	writable := make([]string, 0, len(r.Writable))
	for _, w := range r.Writable {
		if !filepath.IsAbs(w) {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("sandbox.Attach: the writable directory %q is not absolute", w))
		}
		writable = append(writable, filepath.Clean(w))
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, errs.Wrap(EntryFailed, err, "sandbox.Attach: creating the report pipe")
	}
	spec := entrySpec{
		ABI: st.ABI, Writable: writable, Network: r.Network,
		ReportFD: 3 + len(cmd.ExtraFiles), Path: path, Args: cmd.Args,
	}
	arg, err := json.Marshal(spec)
	if err != nil {
		rd.Close()
		wr.Close()
		return nil, errs.Wrap(errs.Internal, err, "sandbox.Attach: encoding the entry")
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, wr)
	cmd.Path = self
	cmd.Args = []string{"dsh-sandbox", marker, string(arg)}
	return &Entry{report: rd, childEnd: wr}, nil
}

// Started closes dsh's copy of the child's end of the report pipe; call it
// once cmd.Start returned, whether it failed or not.
func (e *Entry) Started() { e.childEnd.Close() }

// Err reads the child's report once the process exited: nil when it ran
// the program inside the sandbox, an EntryFailed error saying why when it
// did not. Called earlier, it waits until the program starts or the child
// gives up. It closes the pipe; call it once.
func (e *Entry) Err() error {
	e.childEnd.Close()
	defer e.report.Close()
	msg, err := io.ReadAll(io.LimitReader(e.report, 64<<10))
	if err != nil {
		return errs.Wrap(EntryFailed, err, "reading the sandbox entry's report")
	}
	if len(msg) == 0 {
		return nil
	}
	return errs.New(EntryFailed, "the command could not enter the Landlock sandbox, so it did not run: "+strings.TrimSpace(string(msg)))
}
