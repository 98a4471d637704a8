package commands

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugins/skills/frontmatter"
)

// Codes of this package's errors.
const (
	// Invalid: a command file's front matter is broken; the command is
	// left out and logged.
	Invalid errs.Code = "COMMAND_INVALID"
	// Unreadable: a command file cannot be read, is too large or is not
	// text.
	Unreadable errs.Code = "COMMAND_UNREADABLE"
	// Unknown: a prompt names a command no folder holds.
	Unknown errs.Code = "COMMAND_UNKNOWN"
	// Unsupported: the command uses a feature dsh does not run (!`…`).
	Unsupported errs.Code = "COMMAND_UNSUPPORTED"
)

// MaxFileBytes bounds one command file: it becomes a prompt whole.
const MaxFileBytes = 256 << 10

// Command is one command file.
type Command struct {
	// Name is what follows the slash: the file's name without .md.
	Name string `json:"name"`
	// Namespace is the subfolder path the file is in, colon-separated
	// ("frontend" for frontend/component.md); "" at the top. "/ns:name"
	// invokes it too.
	Namespace    string   `json:"namespace,omitempty"`
	Description  string   `json:"description,omitempty"`
	ArgumentHint string   `json:"argument_hint,omitempty"`
	Model        string   `json:"model,omitempty"`
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// DisableModelInvocation is read for completeness: dsh offers the model
	// no tool that runs commands, so it always holds.
	DisableModelInvocation bool `json:"disable_model_invocation,omitempty"`
	// File is the command file, absolute.
	File string `json:"file"`
	// Body is the text after the front matter.
	Body string `json:"-"`
	// bodyLine is the file line Body starts on.
	bodyLine int
	// unread are the front matter keys dsh does not read, each with its
	// line ("context (line 3)").
	unread []string
}

// readKeys are the front matter keys of a command file dsh reads.
var readKeys = []string{"description", "argument-hint", "model", "allowed-tools", "disable-model-invocation"}

// Qualified is the namespaced name, "ns:name", or Name at the top.
func (c Command) Qualified() string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + ":" + c.Name
}

// Problem is a command file left out, and why.
type Problem struct {
	File string
	Err  error
}

// validName is what a slash can be followed by: a file name Claude Code
// would offer, without spaces or a slash.
var validName = lazyregexp.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// scan reads the *.md files under each of dirs. Within a folder, files
// nearer the top come first; a name found again in a later folder is
// shadowed (project over user, as Claude Code does), and within a folder
// the first file of a name takes the bare name while the others answer to
// their namespaced one.
func scan(dirs []string) ([]Command, []Problem) {
	var out []Command
	var problems []Problem
	for _, dir := range dirs {
		var files []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // the common case: no commands there
			}
			if err != nil {
				// There but unreadable is said, not taken for empty.
				problems = append(problems, Problem{File: p, Err: errs.New(Unreadable, fmt.Sprintf("%s: cannot be listed: %v", p, err)).WithReason("commands/unreadable")})
				return nil
			}
			if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
				files = append(files, p)
			}
			return nil
		})
		sort.SliceStable(files, func(i, j int) bool {
			di, dj := strings.Count(files[i], string(filepath.Separator)), strings.Count(files[j], string(filepath.Separator))
			if di != dj {
				return di < dj
			}
			ni, nj := strings.TrimSuffix(filepath.Base(files[i]), ".md"), strings.TrimSuffix(filepath.Base(files[j]), ".md")
			if ni != nj {
				return ni < nj
			}
			return files[i] < files[j]
		})
		for _, f := range files {
			rel, _ := filepath.Rel(dir, f)
			c, err := load(f, rel)
			if err != nil {
				problems = append(problems, Problem{File: f, Err: err})
				continue
			}
			out = append(out, c)
		}
	}
	return out, problems
}

// load reads one command file; rel is its path below its folder.
func load(file, rel string) (Command, error) {
	name := strings.TrimSuffix(filepath.Base(rel), ".md")
	if !validName.MatchString(name) {
		return Command{}, errs.New(Invalid, fmt.Sprintf("%s: %q cannot follow a slash; name the file with letters, digits, '-', '_' or '.' only", file, name)).WithReason("commands/name")
	}
	var ns []string
	if d := filepath.Dir(rel); d != "." {
		ns = strings.Split(filepath.ToSlash(d), "/")
	}
	f, err := os.Open(file)
	if err != nil {
		return Command{}, errs.New(Unreadable, fmt.Sprintf("%s: cannot be read: %v", file, err)).WithReason("commands/unreadable")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Command{}, errs.New(Unreadable, fmt.Sprintf("%s: cannot be read: %v", file, err)).WithReason("commands/unreadable")
	}
	if len(data) > MaxFileBytes {
		return Command{}, errs.New(Unreadable, fmt.Sprintf("%s: larger than %d bytes; a command is one prompt, keep it shorter", file, MaxFileBytes)).WithReason("commands/too-large")
	}
	if !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 {
		return Command{}, errs.New(Unreadable, fmt.Sprintf("%s: not UTF-8 text", file)).WithReason("commands/binary")
	}
	d, err := frontmatter.Parse(file, data, false)
	if err != nil {
		return Command{}, invalid(err)
	}
	// The body's first line is counted past the blank lines trimmed off,
	// so errors about it name the right line.
	lead := d.Body[:len(d.Body)-len(strings.TrimLeft(d.Body, " \t\r\n"))]
	c := Command{Name: name, Namespace: strings.Join(ns, ":"), File: file, Body: strings.TrimSpace(d.Body), bodyLine: d.BodyLine + strings.Count(lead, "\n")}
	c.ArgumentHint, _ = d.Raw("argument-hint")
	for _, f := range []struct {
		key string
		to  *string
	}{{"description", &c.Description}, {"model", &c.Model}} {
		if *f.to, _, err = d.String(f.key); err != nil {
			return Command{}, invalid(err)
		}
	}
	if c.AllowedTools, err = d.Strings("allowed-tools"); err != nil {
		return Command{}, invalid(err)
	}
	for _, k := range d.Keys() {
		if !slices.Contains(readKeys, k.Name) {
			c.unread = append(c.unread, fmt.Sprintf("%s (line %d)", k.Name, k.Line))
		}
	}
	if v, ok := d.Field("disable-model-invocation"); ok {
		c.DisableModelInvocation = v.Value == "true"
	}
	if c.Description == "" {
		// As Claude Code does: the first line of the prompt.
		first, _, _ := strings.Cut(c.Body, "\n")
		c.Description = strings.TrimSpace(strings.TrimLeft(first, "# "))
	}
	return c, nil
}

// invalid recodes a front matter error as the command's, keeping its
// message (file, line, fix).
func invalid(err error) error {
	msg := err.Error()
	var e *errs.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	return errs.New(Invalid, msg).WithReason("commands/invalid")
}

// Find returns the command of list that name invokes: "ns:name"
// exactly, or the first of that bare name.
func Find(list []Command, name string) (Command, bool) { return lookup(list, name) }

// lookup finds the command name invokes: "ns:name" exactly, or the
// first of that bare name.
func lookup(list []Command, name string) (Command, bool) {
	for _, c := range list {
		if c.Name == name || (c.Namespace != "" && c.Qualified() == name) {
			return c, true
		}
	}
	return Command{}, false
}

// Visible is list as a user sees it: each command once, under its bare
// name when it is the first of that name, else under its namespaced one.
func Visible(list []Command) []Command {
	seen := map[string]bool{}
	out := make([]Command, 0, len(list))
	for _, c := range list {
		key := c.Name
		if seen[key] {
			key = c.Qualified()
			if seen[key] {
				continue // shadowed entirely: a user's command of a project's name
			}
			c.Name, c.Namespace = key, ""
		}
		seen[key] = true
		out = append(out, c)
	}
	return out
}
