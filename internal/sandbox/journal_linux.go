package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// journalDir holds one file per dsh process that has placeholders on disk
// (see placeholder), named <pid>-<start time>, listing them. dsh removes
// its placeholders when the command ends; a dsh killed mid-command cannot,
// and its empty read-only .git/config, AGENTS.md, … would stay in the
// workspace (`git init` there fails). The next dsh to start a sandboxed
// command reads the journals of processes that are gone and removes what
// they list.
var journalDir = defaultJournalDir()

func defaultJournalDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "dsh", "sandbox-placeholders")
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "dsh", "sandbox-placeholders")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("dsh-sandbox-placeholders-%d", os.Getuid()))
}

// processID names a process for as long as it lives: its pid and start
// time (a pid alone is reused). "" when the process is gone.
func processID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name may hold spaces and parentheses: fields are
	// counted after its closing one; the start time is field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return fmt.Sprintf("%d-%s", pid, f[19])
}

var selfID = sync.OnceValue(func() string { return processID(os.Getpid()) })

// writeJournal records the placeholders held now and those about to be
// made in the writable directory root (written first, so a dsh killed
// right after a mkdir is covered); called with held locked. A journal
// that cannot be written costs only the sweep after a crash.
//
// Each line is the writable directory a placeholder was made in and the
// placeholder, both quoted (a path may hold a space or a newline): the
// sweep removes it through that directory, as removePlaceholders does.
func writeJournal(root string, coming ...string) {
	id := selfID()
	if id == "" {
		return
	}
	p := filepath.Join(journalDir, id)
	if len(held.n)+len(coming) == 0 {
		_ = os.Remove(p)
		return
	}
	lines := make([]string, 0, len(held.n)+len(coming))
	for _, k := range coming {
		lines = append(lines, strconv.Quote(root)+" "+strconv.Quote(k))
	}
	for k := range held.n {
		lines = append(lines, strconv.Quote(held.root[k])+" "+strconv.Quote(k))
	}
	sort.Strings(lines)
	if err := os.MkdirAll(journalDir, 0o700); err != nil {
		return
	}
	tmp := p + ".tmp"
	if os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600) == nil {
		_ = os.Rename(tmp, p)
	}
}

// journaled is one placeholder a journal lists; root is "" in a journal
// of a dsh from before roots were written, which listed bare paths.
type journaled struct{ root, path string }

// readJournal parses a journal's lines; a line it cannot read is left
// out.
func readJournal(b []byte) []journaled {
	var out []journaled
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, `"`) {
			if line != "" {
				out = append(out, journaled{path: line})
			}
			continue
		}
		q, err := strconv.QuotedPrefix(line)
		if err != nil || len(line) <= len(q)+1 {
			continue
		}
		root, err1 := strconv.Unquote(q)
		p, err2 := strconv.Unquote(line[len(q)+1:])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, journaled{root: root, path: p})
	}
	return out
}

var sweepOnce sync.Once

// sweepStaleOnce sweeps once per process, at its first sandboxed command
// with namespaces, whether or not that one needs placeholders.
func sweepStaleOnce() {
	sweepOnce.Do(func() {
		held.Lock()
		defer held.Unlock()
		sweepStale()
	})
}

// sweepStale removes the placeholders listed by the journals of dsh
// processes that are gone, and those journals; called with held locked.
// Only what is still a placeholder goes: an empty directory (rmdir
// refuses any other) or a commondir file holding ".".
func sweepStale() {
	entries, err := os.ReadDir(journalDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		pid, _, ok := strings.Cut(name, "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || strings.HasSuffix(name, ".tmp") || processID(n) == name {
			continue
		}
		b, err := os.ReadFile(filepath.Join(journalDir, name))
		if err != nil {
			continue
		}
		js := readJournal(b)
		// The deepest first: a parent goes once its placeholder has.
		sort.Slice(js, func(i, j int) bool { return len(js[i].path) > len(js[j].path) })
		for _, j := range js {
			if !filepath.IsAbs(j.path) || held.n[j.path] > 0 {
				continue
			}
			removeIfPlaceholder(j.root, j.path)
		}
		_ = os.Remove(filepath.Join(journalDir, name))
	}
}

// removeIfPlaceholder removes p when it is an empty directory or a
// commondir placeholder file, through root, the writable directory it was
// made in: a way through a symlink (one a command left after dsh died)
// stays inside it. A journal that names no root leaves p unless the way
// to it has no symlink at all.
func removeIfPlaceholder(root, p string) {
	if root == "" || !strings.HasPrefix(p, root+"/") {
		if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err != nil || d != filepath.Dir(p) {
			return
		}
		root, p = filepath.Dir(p), filepath.Base(p)
	} else {
		p = p[len(root)+1:]
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return
	}
	defer r.Close()
	st, err := r.Lstat(p)
	if err != nil {
		return
	}
	switch {
	case st.IsDir():
		_ = r.Remove(p) // fails unless empty
	case st.Mode().IsRegular() && filepath.Base(p) == "commondir" && st.Size() == 2:
		if b, _ := r.ReadFile(p); string(b) == ".\n" {
			_ = r.Remove(p)
		}
	}
}
