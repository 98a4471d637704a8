package files

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"

	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/tools"
)

// sniffBytes is how much of a file decides whether it is text.
const sniffBytes = 1024

// failf is an error result: a failure the model can act on.
func failf(format string, a ...any) (tools.Result, error) {
	return tools.Result{Content: fmt.Sprintf(format, a...), IsError: true}, nil
}

// fail is an error result carrying err's text.
func fail(err error) (tools.Result, error) {
	return tools.Result{Content: err.Error(), IsError: true}, nil
}

// decode reads a call's arguments into args, refusing unknown fields: the
// schema was checked before the call, but the tool does not rely on it.
func decode(call tools.Call, args any) error {
	raw := call.Arguments
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(args); err != nil {
		return fmt.Errorf("the arguments of %s are not valid: %v; see the tool's schema", call.Name, err)
	}
	return nil
}

// place is one call's view of the workspace: its directory and the
// os.Root every file operation goes through.
type place struct {
	dir  string
	root *os.Root
}

// enter opens the call's workspace.
func enter(call tools.Call) (*place, error) {
	dir, err := workspace.Dir(call.Workspace)
	if err != nil {
		return nil, err
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, err
	}
	return &place{dir: dir, root: root}, nil
}

func (p *place) close() { p.root.Close() }

// rel confines the path argument arg; see workspace.Rel.
func (p *place) rel(arg string) (string, error) { return workspace.Rel(p.dir, arg) }

// special refuses, before anything opens it, a path naming a device, pipe
// or socket: opening a pipe would block the call.
func (p *place) special(rel, arg string) error {
	st, err := p.root.Stat(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !workspace.Escaped(err) {
			return nil // the open that follows says it better (or creates it)
		}
		return p.explain(err, arg)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v): the file tools handle regular files and folders only", workspace.Quote(arg), st.Mode().Type())
	}
	return nil
}

// openRead opens rel for reading without blocking on a named pipe that
// took the place of the file checked (or listed) a moment before: such a
// call would otherwise hang until a writer came. The caller still checks
// that what it opened is a regular file.
func (p *place) openRead(rel string) (*os.File, error) {
	return p.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// explain turns the error of an operation on arg into a message for the
// model: an escape names the rule, a missing file says so.
func (p *place) explain(err error, arg string) error {
	if workspace.Escaped(err) {
		return workspace.Explain(err, arg, p.dir)
	}
	if arg == "" {
		arg = "."
	}
	q := workspace.Quote(arg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist in the workspace; use list or glob to find the right path", q)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s is a directory; give a file path", q)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s is a file, or goes through one, where a folder was expected", q)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be accessed: permission denied", q)
	case errors.Is(err, errLinked):
		return fmt.Errorf("%s %v", q, err)
	}
	return fmt.Errorf("%s: %v", q, workspace.Bare(err))
}

// binaryReason says why head (a file's first bytes, cut at sniffBytes or
// at the end of the file) is not text, or "" when it is: a NUL byte or
// bytes that are not UTF-8. A rune cut by the sniff window is fine.
func binaryReason(head []byte, whole bool) string {
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return fmt.Sprintf("a NUL byte at offset %d", i)
	}
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n == 1 {
			if !whole && !utf8.FullRune(head[i:]) {
				return ""
			}
			return fmt.Sprintf("bytes that are not UTF-8 at offset %d", i)
		}
		i += n
	}
	return ""
}

// sniff reads the first sniffBytes of r and reports why it is binary ("" for
// text); r is left where it was found (r must be an io.ReadSeeker at 0).
func sniff(f io.ReadSeeker) (string, error) {
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, head)
	whole := err == io.EOF || err == io.ErrUnexpectedEOF
	if err != nil && !whole {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	return binaryReason(head[:n], whole), nil
}

// lines calls fn for each line of r (1-based number, text without the line
// ending), keeping at most maxLen bytes of a line and reporting whether it
// was cut; fn returns false to stop. A final line without a newline counts.
func lines(r io.Reader, maxLen int, fn func(n int, text []byte, cut bool) bool) error {
	return linesFrom(bufio.NewReaderSize(r, 16<<10), maxLen, fn)
}

// linesFrom is lines over a reader the caller reuses across files.
func linesFrom(br *bufio.Reader, maxLen int, fn func(n int, text []byte, cut bool) bool) error {
	buf := make([]byte, 0, 256)
	for n := 1; ; n++ {
		buf = buf[:0]
		cut, read := false, 0
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			read += len(chunk)
			chunk = bytes.TrimSuffix(chunk, []byte("\n"))
			room := maxLen - len(buf)
			if len(chunk) > room {
				chunk, cut = chunk[:room], true
			}
			buf = append(buf, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
		if read == 0 {
			return nil
		}
		text := buf
		if cut {
			text = validPrefix(text)
		} else {
			text = bytes.TrimSuffix(text, []byte("\r"))
		}
		if !fn(n, text, cut) || err == io.EOF {
			return nil
		}
	}
}

// validPrefix drops a rune cut in half at the end of b.
func validPrefix(b []byte) []byte {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			break
		}
	}
	return b
}

// cutLine shortens s to at most max bytes on a rune boundary, marking the
// cut.
func cutLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return string(validPrefix([]byte(s[:max]))) + "… [line cut]"
}

// size renders a byte count the way its limit was likely written.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return plural(n, "byte", "bytes")
}

// plural renders "1 file", "2 files".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// isRoot reports a confined path that names the workspace itself.
func isRoot(rel string) bool { return rel == "." }
